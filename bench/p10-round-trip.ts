import path from 'node:path';
import { BashShellFactory } from '../src/adapters/bash-shell.js';
import { OpenAiLlmClient } from '../src/adapters/openai-llm.js';
import type { ShellFactory } from '../src/core/tools/shell-session.js';
import { startFakeLlm, type FakeLlm } from '../test/fake-llm/fake-llm-server.js';
import { connectSse, type SseConnection } from '../test/support/sse-client.js';
import { startServer, type TestServer } from '../test/support/agentd.js';
import type { Benchmark } from './support/benchmark.js';
import { Meter, timedLlm, timedShells } from './support/instrumented.js';
import { fmt, ratio, summarize } from './support/stats.js';
import { StepFloor } from './support/step-floor.js';

/**
 * P10: what a client feels. One round trip is `POST /conversations/{id}/messages` until the
 * run's end is seen on the conversation's SSE stream, for a two-step run (one `bash true` call,
 * then a text answer) with the fake LLM answering at once. Measured on a new conversation (its
 * shell starts during the run) and on a later turn of the same conversation, against the floor:
 * two fake-LLM round trips plus one command in an already-running shell, sampled in the same run.
 */
export const p10RoundTrip: Benchmark = {
  id: 'P10',
  title: 'client round trip',
  measures:
    'ms from `POST .../messages` to the run\'s end seen on SSE, for a run of one `bash true` call then an answer, on a new conversation and on a later turn, with a breakdown (HTTP, LLM, shell start, tool, the rest), versus the floor: two fake-LLM round trips plus one command in a running shell.',
  async run({ quick, tmp }) {
    const rounds = quick ? 12 : 40;
    const llm = new Meter();
    const tool = new Meter();
    const shellStart = new Meter();
    const fake = await startFakeLlm({ whenExhausted: { text: 'done' } });
    const server = await startServer({ overrides: { llm: timedLlm(new OpenAiLlmClient(), llm), shells: timedShellStarts(timedShells(new BashShellFactory(), tool), shellStart) } });
    let floor: StepFloor | undefined;
    try {
      // Warm-up: the first conversation pays for JIT and first-use costs nobody sees twice.
      const warm = await Conversation.create(server, fake);
      for (let i = 0; i < 3; i++) await warm.turn();
      warm.close();
      floor = await StepFloor.start({ fake, firstRequest: fake.requests[0]!, workdir: path.join(tmp, 'floor-workdir') });

      const fresh: number[] = [];
      const later: number[] = [];
      const postMs: number[] = [];
      const parts = { fresh: zeroParts(), later: zeroParts() };
      for (let round = 0; round < rounds; round++) {
        await floor.sample(2);
        const conversation = await Conversation.create(server, fake);
        for (const [kind, list] of [['fresh', fresh], ['later', later]] as const) {
          const before = { llm: llm.ms, tool: tool.ms, shellStart: shellStart.ms };
          const { totalMs, httpMs } = await conversation.turn();
          list.push(totalMs);
          postMs.push(httpMs);
          const part = parts[kind];
          part.llm += llm.ms - before.llm;
          part.tool += tool.ms - before.tool;
          part.shellStart += shellStart.ms - before.shellStart;
          part.http += httpMs;
        }
        conversation.close();
      }
      const floorMs = 2 * summarize(floor.llmMs).p50 + summarize(floor.shellMs).p50;
      const freshSummary = summarize(fresh);
      const laterSummary = summarize(later);
      const row = (label: string, summary: ReturnType<typeof summarize>) => [label, fmt(summary.p50), fmt(summary.mean), fmt(summary.p99), ratio(summary.p50, floorMs)];
      const breakdown = (kind: 'fresh' | 'later', total: number[]) => {
        const part = parts[kind];
        const mean = (ms: number) => ms / total.length;
        const sum = total.reduce((a, b) => a + b, 0) / total.length;
        const rest = sum - mean(part.llm) - mean(part.tool) - mean(part.shellStart) - mean(part.http);
        return [fmt(mean(part.http)), fmt(mean(part.llm)), fmt(mean(part.shellStart)), fmt(mean(part.tool)), fmt(rest), fmt(sum)];
      };
      return {
        sizes: `${rounds} new conversations, each with a first and a second turn, alternating with floor samples (after a 3-turn warm-up)`,
        tables: [
          {
            caption: 'Round trip: POST .../messages → run end seen on SSE',
            columns: ['', 'p50 ms', 'mean ms', 'p99 ms', 'p50 vs floor'],
            rows: [
              row('new conversation (first turn)', freshSummary),
              row('later turn of the same conversation', laterSummary),
              ['floor: 2 fake-LLM round trips + `true` in a running shell', fmt(floorMs), '', '', '×1'],
            ],
          },
          {
            caption: 'Where a round trip goes (means, ms)',
            columns: ['', 'HTTP POST → 202', 'LLM (2 calls)', 'shell start', 'tool', 'the rest (run start/end, appends, SSE delivery)', 'total'],
            rows: [
              ['new conversation', ...breakdown('fresh', fresh)],
              ['later turn', ...breakdown('later', later)],
            ],
          },
        ],
        notes: [
          `A new conversation's round trip is ${ratio(freshSummary.p50, floorMs)} its floor at the median (${fmt(freshSummary.p50)} ms vs ${fmt(floorMs)} ms); a later turn ${ratio(laterSummary.p50, floorMs)} (${fmt(laterSummary.p50)} ms).`,
          'The server runs in this process (as in the tests), so "the rest" includes the client\'s own SSE parsing; parts overlap when the shell starts while the LLM answers.',
        ],
      };
    } finally {
      await floor?.close();
      await server.close();
      await fake.close();
    }
  },
};

function zeroParts() {
  return { llm: 0, tool: 0, shellStart: 0, http: 0 };
}

/** Times each shell's start (`create`). */
function timedShellStarts(inner: ShellFactory, meter: Meter): ShellFactory {
  return { create: (options) => meter.time(() => inner.create(options)) };
}

/** A conversation watched over SSE as a client would. */
class Conversation {
  private turns = 0;

  private constructor(
    private readonly server: TestServer,
    private readonly fake: FakeLlm,
    private readonly id: string,
    private readonly stream: SseConnection,
  ) {}

  static async create(server: TestServer, fake: FakeLlm): Promise<Conversation> {
    const response = await fetch(`${server.url}/conversations`, {
      method: 'POST',
      headers: { ...server.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ llm: { model: 'fake-model', base_url: fake.url, api_key: 'sk-bench' } }),
    });
    if (response.status !== 201) throw new Error(`POST /conversations: ${response.status} ${await response.text()}`);
    const { id } = (await response.json()) as { id: string };
    const stream = await connectSse(`${server.url}/conversations/${id}/events/stream`, server.auth);
    return new Conversation(server, fake, id, stream);
  }

  /** One message, one `bash true`, one answer; resolves when the run's end arrives on SSE. */
  async turn(): Promise<{ totalMs: number; httpMs: number }> {
    const turn = ++this.turns;
    this.fake.setScript([{ toolCalls: [{ name: 'bash', arguments: { command: `true # turn ${turn}` } }] }, { text: `done ${turn}` }]);
    const endsBefore = this.runEnds();
    const started = performance.now();
    const posted = await fetch(`${this.server.url}/conversations/${this.id}/messages`, {
      method: 'POST',
      headers: { ...this.server.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ content: `Turn ${turn}: run true.`, run: true }),
    });
    const httpMs = performance.now() - started;
    if (posted.status !== 202) throw new Error(`POST /messages: ${posted.status} ${await posted.text()}`);
    await this.stream.waitFor(() => this.runEnds() > endsBefore, 30_000);
    return { totalMs: performance.now() - started, httpMs };
  }

  close(): void {
    this.stream.close();
  }

  private runEnds(): number {
    return this.stream.messages.filter((message) => message.event === 'state_update' && !message.data.includes('"status":"running"')).length;
  }
}
