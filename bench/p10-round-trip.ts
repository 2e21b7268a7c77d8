import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { OpenAiLlmClient } from '../src/adapters/llm/openai-llm.js';
import type { ShellFactory } from '../src/core/tools/shell-session.js';
import { startFakeLlm, type FakeLlm } from '../test/fake-llm/fake-llm-server.js';
import { startServer, type TestServer } from '../test/support/agentd.js';
import type { TurnClientReply, TurnClientRequest } from './children/turn-client.js';
import { ensureRuntime, NODE_RUNTIME_VERSION } from '../scripts/binary-runtime.mjs';
import type { Benchmark, BenchOptions, BenchReport } from './support/benchmark.js';
import { EventTap } from './support/instrumented.js';
import { SEGMENTS, TurnTimeline, type SegmentName } from './support/turn-timeline.js';
import { childScript, ROOT, runBenchmarkInChild } from './support/processes.js';
import { shellsRunAs } from './support/machine.js';
import { fmt, monotonicMs, ratio, summarize } from './support/stats.js';
import { compactHeap } from '../src/perf/compact-heap.js';
import { CompactWhenIdle } from '../src/perf/compact-when-idle.js';
import { StepFloor } from './support/step-floor.js';

/** A pause for the server's leftover work of the previous round before the floor is sampled. */
const SETTLE_MS = 25;

/**
 * How long the fake LLM takes to answer in the last rounds: a fast hosted model's time to a short
 * answer. A new conversation's shell starts at its creation, beside the run's first LLM call; with
 * an LLM slower than the sandbox's start, the tool call finds the shell ready.
 */
const SLOW_LLM_MS = 300;

/**
 * The warm-up: conversations of this many turns each, before anything is measured. Until round 2's
 * thirty-third session it was one conversation of 3 turns: most of the code a turn runs was still
 * in V8's baseline tier (perf: inline-cache builtins the largest leaf of the server's thread), and
 * 200 turns more took 2-3 ms of the server's CPU off each later turn (RESULTS.md). A server that
 * has served a few hundred turns is past that; P10 measures the warm round trip.
 */
const WARM_CONVERSATIONS = 20;
const WARM_TURNS = 10;

/**
 * How long the later turns measured alone wait after their conversation's creation: the warm
 * shells' refill it set going (one or two sandbox starts, ~35 ms each here) is over by then.
 */
const REFILL_SETTLE_MS = 300;
/** The pause before each of the paced later turns: a client that reads an answer before it sends the next message. */
const PACED_GAP_MS = 400;

/**
 * P10: what a client feels. One round trip is `POST /conversations/{id}/messages` until the
 * run's end is seen on the conversation's SSE stream, for a two-step run (one `bash true` call,
 * then a text answer) with the fake LLM answering at once. Measured on a new conversation (its
 * shell starts during the run) and on a later turn of the same conversation, against the floor:
 * two fake-LLM round trips plus one command in an already-running shell, sampled in the same run.
 * The client is a process of its own (children/turn-client.ts); the server runs in this one,
 * its parts wrapped to time the path.
 */
export const p10RoundTrip: Benchmark = {
  id: 'P10',
  title: 'client round trip',
  measures:
    'ms from `POST .../messages` to the run\'s end seen on SSE, for a run of one `bash true` call then an answer, on a new conversation and on a later turn (and on a new conversation with an LLM answering after 300 ms), with a breakdown (HTTP, LLM, shell start, tool, the rest), versus the floor: two fake-LLM round trips plus one command in a running shell; the round trips again on the Node agentd ships (its Docker image and single executable).',
  async run(options) {
    const here = await measure(options);
    return process.env[SHIPPED_PASS] ? here : withShippedRuntime(here, options.quick);
  },
};

type P10Report = Awaited<ReturnType<Benchmark['run']>>;

/** Set in the pass on the runtime agentd ships: it measures, and starts no pass of its own. */
const SHIPPED_PASS = 'AGENTD_BENCH_P10_SHIPPED_PASS';

/**
 * The same measurements again on the Node that agentd ships on (the Docker image's and the single
 * executable's, scripts/binary-runtime.mjs), in a fresh process of the runner: the machines
 * develop on Node 20, while a user's server runs the current LTS, whose V8 runs a turn's code
 * differently. That pass's round-trip table is added to this report.
 */
async function withShippedRuntime(here: P10Report, quick: boolean): Promise<P10Report> {
  if (process.version === `v${NODE_RUNTIME_VERSION}`) return here;
  // --quick: the pass costs as long as the first (13 s here), a tenth of a run meant to take two minutes.
  if (quick) return { ...here, notes: [...here.notes, `--quick: not measured again on the runtime agentd ships (Node ${NODE_RUNTIME_VERSION}); a full run does.`] };
  let report: BenchReport;
  try {
    report = await runBenchmarkInChild('P10', { quick, execPath: ensureRuntime({ root: ROOT }), env: { ...process.env, [SHIPPED_PASS]: '1' }, quiet: true });
  } catch (error) {
    return { ...here, notes: [...here.notes, `Not measured again on the runtime agentd ships (Node ${NODE_RUNTIME_VERSION}): ${error instanceof Error ? error.message : String(error)}.`] };
  }
  const roundTrips = report.tables[0]!;
  const p50 = (label: string) => roundTrips.rows.find((row) => row[0]!.startsWith(label))?.[1] ?? '?';
  const table = { ...roundTrips, caption: `The same round trips on the runtime agentd ships (Node ${NODE_RUNTIME_VERSION}: the Docker image's and the single executable's), measured after this run by the same code in a process of its own (${report.seconds.toFixed(1)} s)` };
  const note = `On the runtime agentd ships (Node ${NODE_RUNTIME_VERSION}; this run's is ${process.version}), a later turn takes ${p50('later turn of the same conversation')} ms at the median, a new conversation ${p50('new conversation (first turn)')} ms, against a floor plus the client's hop of ${p50('floor + the client')} ms there.`;
  return { ...here, tables: [...here.tables, table], notes: [...here.notes, note] };
}

/** The measurements, on the Node running this process. */
async function measure({ quick, tmp }: BenchOptions): Promise<P10Report> {
  const rounds = quick ? 12 : 40;
  const slowRounds = quick ? 3 : 8;
  const coldRounds = quick ? 4 : 12;
  const aloneTurns = quick ? 8 : 20;
  const pacedTurns = quick ? 6 : 16;
  const timeline = new TurnTimeline();
  const tap = new EventTap();
  timeline.tap(tap);
  const fake = await startFakeLlm({ whenExhausted: { text: 'done' } });
  // The server's own shells (its sandbox when it has one, spawned by its spawner), timed.
  let ownShells: ShellFactory | undefined;
  // The heap compaction `agentd serve` makes once runs are over (and after start-up), counted.
  let compactions = 0;
  const compactor = new CompactWhenIdle({
    compact: () => {
      compactions += 1;
      return compactHeap();
    },
  });
  const server = await startServer({ overrides: { llm: timeline.llm(new OpenAiLlmClient()), wrapShells: (shells) => timeline.shells((ownShells = shells)), readers: [tap, compactor] } });
  compactor.afterStart();
  timeline.checkpoints(server.services.checkpoints);
  const record = server.services.recorder.append.bind(server.services.recorder);
  server.services.recorder.append = (conversationId, event) => timeline.time('append', () => record(conversationId, event));
  const client = new TurnClient();
  let bare: BareServer | undefined;
  let floor: StepFloor | undefined;
  const hops: number[] = [];
  try {
    bare = await BareServer.start();
    // Warm-up: conversations like the measured ones pay for first-use costs nobody sees twice and
    // for V8's tiering of the code a turn runs (see WARM_CONVERSATIONS).
    for (let i = 0; i < WARM_CONVERSATIONS; i++) {
      const warm = await Conversation.create(client, server, fake, timeline);
      for (let turn = 0; turn < WARM_TURNS; turn++) await warm.turn();
      warm.close();
    }
    floor = await StepFloor.start({ fake, firstRequest: fake.requests[0]!, workdir: path.join(tmp, 'floor-workdir'), shells: ownShells! });

    const turns = { fresh: [] as TurnFigures[], later: [] as TurnFigures[] };
    /** When each round's conversation was created: the pace at which the warm shells are taken. */
    const createdAt: number[] = [];
    for (let round = 0; round < rounds; round++) {
      // The floor is sampled once the server has done with the conversation closed just before
      // (its SSE stream's end and the run's tail): sampled at once, the first sample of each
      // round took that work's CPU (5.4-6.0 ms p50 against 3.4-3.6 ms for the second).
      await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
      await floor.sample(2);
      for (let i = 0; i < 2; i++) hops.push((await client.ask({ type: 'hop', url: bare.url, content: `Turn ${i + 1}: run true.` }, 'hopped')).ms);
      createdAt.push(performance.now());
      const conversation = await Conversation.create(client, server, fake, timeline);
      for (const kind of ['fresh', 'later'] as const) {
        timeline.reset();
        const cpuBefore = process.cpuUsage();
        const { totalMs, httpMs, clientCpuMs } = await conversation.turn();
        const cpu = process.cpuUsage(cpuBefore);
        turns[kind].push({ totalMs, httpMs, cpuMs: (cpu.user + cpu.system) / 1000, clientCpuMs, segments: timeline.segments(), spent: new Map(timeline.spent) });
        if (process.env.P10_DEBUG && round === rounds - 1) console.log(kind, timeline.dump());
      }
      conversation.close();
    }
    // Later turns with no conversation created meanwhile. In the rounds above, each creation takes
    // a warm shell and the refill's sandbox start may run beside the turns around it (RESULTS.md,
    // thirty-second session: 15-30 ms of CPU here, on about every other later turn); here no
    // sandbox starts beside the turn.
    const alone: TurnFigures[] = [];
    {
      const conversation = await Conversation.create(client, server, fake, timeline);
      await conversation.turn();
      await new Promise((resolve) => setTimeout(resolve, REFILL_SETTLE_MS));
      for (let i = 0; i < aloneTurns; i++) {
        await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
        alone.push(await timedTurn(conversation, timeline));
      }
      conversation.close();
    }
    // Later turns PACED_GAP_MS apart: the server compacts its heap once no run has been in
    // progress for a while, and a compaction costs the turns after it V8's optimized code
    // (RESULTS.md, thirty-sixth session); it must not come between turns this close.
    const paced: TurnFigures[] = [];
    const compactionsBefore = compactions;
    {
      const conversation = await Conversation.create(client, server, fake, timeline);
      await conversation.turn();
      for (let i = 0; i < pacedTurns; i++) {
        await new Promise((resolve) => setTimeout(resolve, PACED_GAP_MS));
        paced.push(await timedTurn(conversation, timeline));
      }
      conversation.close();
    }
    const pacedCompactions = compactions - compactionsBefore;
    // New conversations in workdirs of the client's: no warm shell (server-chosen workdirs only), the shell started at creation.
    const cold: TurnFigures[] = [];
    for (let round = 0; round < coldRounds; round++) {
      await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
      const conversation = await Conversation.create(client, server, fake, timeline, path.join(tmp, `client-workdir-${round}`));
      cold.push(await timedTurn(conversation, timeline));
      conversation.close();
    }
    // New conversations again, the LLM answering each request after SLOW_LLM_MS.
    const slow: TurnFigures[] = [];
    for (let round = 0; round < slowRounds; round++) {
      await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
      const conversation = await Conversation.create(client, server, fake, timeline);
      slow.push(await timedTurn(conversation, timeline, SLOW_LLM_MS));
      conversation.close();
    }
    // sample() times a request like the run's first (system prompt and one user message): a P10
    // turn's two requests are that small. (llmMs holds P1's replayed requests; empty here.)
    const floorMs = 2 * summarize(floor.firstLlmMs).p50 + summarize(floor.shellMs).p50;
    if (!Number.isFinite(floorMs)) throw new Error('P10: no floor samples');
    const hop = summarize(hops);
    const paceMs = summarize(createdAt.slice(1).map((at, i) => at - createdAt[i]!)).p50;
    const hopFloorMs = floorMs + hop.p50;
    const total = (kind: 'fresh' | 'later') => summarize(turns[kind].map((turn) => turn.totalMs));
    const freshSummary = total('fresh');
    const laterSummary = total('later');
    const aloneSummary = summarize(alone.map((turn) => turn.totalMs));
    const pacedSummary = summarize(paced.map((turn) => turn.totalMs));
    const slowSummary = summarize(slow.map((turn) => turn.totalMs));
    const coldSummary = summarize(cold.map((turn) => turn.totalMs));
    const coldWait = summarize(cold.map((turn) => turn.segments['answer → tool starts'])).p50;
    const freshWait = summarize(turns.fresh.map((turn) => turn.segments['answer → tool starts'])).p50;
    const slowFloorMs = floorMs + 2 * SLOW_LLM_MS;
    const slowWait = summarize(slow.map((turn) => turn.segments['answer → tool starts'])).p50;
    const laterWait = summarize(turns.later.map((turn) => turn.segments['answer → tool starts'])).p50;
    const row = (label: string, summary: ReturnType<typeof summarize>, floor = floorMs) => [label, fmt(summary.p50), fmt(summary.mean), fmt(summary.p99), ratio(summary.p50, floor)];
    const p50 = (kind: 'fresh' | 'later', value: (turn: TurnFigures) => number) => fmt(summarize(turns[kind].map(value)).p50);
    const SPENT = ['append', 'checkpoint atRunStart', 'checkpoint beforeTool', 'checkpoint atRunEnd', 'shell start'];
    return {
      sizes: `${rounds} new conversations, each with a first and a second turn, alternating with floor samples (after a warm-up of ${WARM_CONVERSATIONS} conversations of ${WARM_TURNS} turns); then ${aloneTurns} later turns of one conversation and ${pacedTurns} of another ${PACED_GAP_MS} ms apart; ${coldRounds} new conversations in workdirs of the client's and ${slowRounds} with an LLM answering after ${SLOW_LLM_MS} ms`,
      tables: [
        {
          caption: 'Round trip: POST .../messages → run end seen on SSE',
          columns: ['', 'p50 ms', 'mean ms', 'p99 ms', 'p50 vs floor'],
          rows: [
            row('new conversation (first turn)', freshSummary),
            row('later turn of the same conversation', laterSummary),
            row(`later turns of one conversation, none created meanwhile (${aloneTurns} in a row)`, aloneSummary),
            row(`later turns of one conversation, ${PACED_GAP_MS} ms apart (${pacedTurns} in a row)`, pacedSummary),
            row("new conversation in a workdir of the client's (no warm shell)", coldSummary),
            ['floor: 2 fake-LLM round trips + `true` in a running shell', fmt(floorMs), '', '', '×1'],
            [`the client's own hop: a POST like a turn's, answered at once by a bare node:http server`, fmt(hop.p50), fmt(hop.mean), fmt(hop.p99), ''],
            ['floor + the client\'s hop', fmt(hopFloorMs), '', '', ratio(hopFloorMs, floorMs)],
            row(`new conversation, the LLM answering after ${SLOW_LLM_MS} ms`, slowSummary, slowFloorMs),
            [`its floor: the floor + 2 × ${SLOW_LLM_MS} ms`, fmt(slowFloorMs), '', '', '×1'],
          ],
        },
        {
          caption: 'The critical path, consecutive segments (p50 ms each; they add up to about the total)',
          columns: ['', ...SEGMENTS],
          rows: (['fresh', 'later'] as const).map((kind) => [kind === 'fresh' ? 'new conversation' : 'later turn', ...SEGMENTS.map((name) => p50(kind, (turn) => turn.segments[name]))]),
        },
        {
          caption: 'Parts that overlap the path (p50 ms per turn): HTTP answer, event appends (sum), workdir checkpoints, shell start; and the CPU time per round trip of the server\'s process (with the fake LLM) and of the client\'s',
          columns: ['', 'POST → 202', ...SPENT, 'server CPU', 'client CPU'],
          rows: (['fresh', 'later'] as const).map((kind) => [kind === 'fresh' ? 'new conversation' : 'later turn', p50(kind, (turn) => turn.httpMs), ...SPENT.map((name) => p50(kind, (turn) => turn.spent.get(name) ?? 0)), p50(kind, (turn) => turn.cpuMs), p50(kind, (turn) => turn.clientCpuMs)]),
        },
      ],
      notes: [
        `A new conversation's round trip is ${ratio(freshSummary.p50, floorMs)} its floor at the median (${fmt(freshSummary.p50)} ms vs ${fmt(floorMs)} ms); a later turn ${ratio(laterSummary.p50, floorMs)} (${fmt(laterSummary.p50)} ms).`,
        `The server compacts its heap as \`agentd serve\` does, once no run has been in progress for a while (compact-when-idle.ts); between the ${pacedTurns} later turns ${PACED_GAP_MS} ms apart it compacted ${pacedCompactions} time(s) (each compaction costs the turns after it V8's optimized code).`,
        `Each round above creates a conversation, which takes one of the warm shells; the refill's sandbox start (bwrap, bash, the network helper) may run beside the turns of the rounds around it (RESULTS.md, thirty-second session). The same later turn with no conversation created meanwhile (${aloneTurns} turns of one conversation, ${SETTLE_MS} ms apart, after its refill was over) takes ${fmt(aloneSummary.p50)} ms at the median (${ratio(aloneSummary.p50, floorMs)} the floor, ${ratio(aloneSummary.p50, hopFloorMs)} the floor plus the client's hop).`,
        `A client pays one HTTP request and reads one SSE event whatever the server does: from the same client process, a POST like a turn's answered at once by a bare node:http server (in the benchmark's process, as the server is) takes ${fmt(hop.p50)} ms at the median. Against the floor plus that hop (${fmt(hopFloorMs)} ms) a later turn is ${ratio(laterSummary.p50, hopFloorMs)}, a new conversation ${ratio(freshSummary.p50, hopFloorMs)}.`,
        `A new conversation created with the server's defaults takes the oldest of the shells the server started ahead for the next such conversations (AGENTD_WARM_SHELLS, two by default; after a take the next starts 100 ms later, or at once when the take left none ready, one start at a time until the count is ready): its first tool call waited ${fmt(freshWait)} ms at the median from the LLM's answer. These conversations come every ${fmt(paceMs)} ms here at the median, quicker than the delay: the pool is refilled at the pace a sandbox starts, and those starts land on the turns around each take. One in a workdir of the client's has no warm shell: its shell starts at its creation and, with the fake LLM answering at once, its first tool call waited ${fmt(coldWait)} ms for it (${fmt(coldSummary.p50)} ms in all). With an LLM answering after ${SLOW_LLM_MS} ms, the wait from the answer to the tool's start is ${fmt(slowWait)} ms at the median (a later turn's: ${fmt(laterWait)} ms), and the round trip ${fmt(slowSummary.p50)} ms against its floor of ${fmt(slowFloorMs)} ms (${ratio(slowSummary.p50, slowFloorMs)}).`,
        `The agent's shells, the floor's too, run ${shellsRunAs(server.services.sandbox)}: the server's own, as \`agentd\` runs them on this machine.`,
        'The client (its POST through fetch, its SSE stream) runs in a process of its own, as a real client does; the server, the fake LLM and the floor\'s samples share the benchmark\'s process. The two processes\' instants are compared on CLOCK_MONOTONIC. Until round 2\'s thirteenth session the client ran in the server\'s process and its CPU was on the path (RESULTS.md).',
      ],
    };
  } finally {
    compactor.close();
    client.close();
    await bare?.close();
    await floor?.close();
    await server.close();
    await fake.close();
  }
}

/** One turn of `conversation` on a fresh timeline (no CPU figure: only the rounds' turns read it). */
async function timedTurn(conversation: Conversation, timeline: TurnTimeline, llmDelayMs = 0): Promise<TurnFigures> {
  timeline.reset();
  const { totalMs, httpMs, clientCpuMs } = await conversation.turn(llmDelayMs);
  return { totalMs, httpMs, cpuMs: 0, clientCpuMs, segments: timeline.segments(), spent: new Map(timeline.spent) };
}

interface TurnFigures {
  totalMs: number;
  httpMs: number;
  /** CPU time of this process (the server and its fake LLM, all threads) over the round trip: less moved by other load than wall time. */
  cpuMs: number;
  /** The client process's CPU time over the round trip (its POST and its SSE stream). */
  clientCpuMs: number;
  segments: Record<SegmentName, number>;
  spent: Map<string, number>;
}

/** The client process (children/turn-client.ts): one for the whole benchmark, as one client program. */
class TurnClient {
  private readonly child: ChildProcess;
  private waiting: ((reply: TurnClientReply) => void) | null = null;

  constructor() {
    this.child = fork(childScript('turn-client'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    // At the lowest priority, as P1's SSE watcher: a client runs on another machine. Woken by the
    // 202 and by each SSE write, it was scheduled on the server's core and did its parsing before
    // the server went on; niced, it runs beside the server or while the server waits. Its own time
    // on the path (the POST it sends, the run's end it reads) still counts.
    os.setPriority(this.child.pid!, 19);
    this.child.on('message', (reply: TurnClientReply) => this.waiting?.(reply));
  }

  async ask<T extends TurnClientReply['type']>(request: TurnClientRequest, expected: T): Promise<Extract<TurnClientReply, { type: T }>> {
    const reply = await new Promise<TurnClientReply>((resolve, reject) => {
      const exited = () => reject(new Error('the turn client exited'));
      this.child.once('exit', exited);
      this.waiting = (answer) => {
        this.child.off('exit', exited);
        resolve(answer);
      };
      this.child.send(request);
    });
    if (reply.type === 'failed') throw new Error(`turn client: ${reply.message}`);
    if (reply.type !== expected) throw new Error(`turn client: ${reply.type}, expected ${expected}`);
    return reply as Extract<TurnClientReply, { type: T }>;
  }

  tell(request: TurnClientRequest): void {
    this.child.send(request);
  }

  close(): void {
    this.child.kill();
  }
}

/** What the client's hop is measured against: a server that reads a POST and answers 202 at once. */
class BareServer {
  private constructor(
    private readonly server: http.Server,
    readonly url: string,
  ) {}

  static async start(): Promise<BareServer> {
    const server = http.createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        response.writeHead(202, { 'content-type': 'application/json' });
        response.end('{"status":"accepted"}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    return new BareServer(server, `http://127.0.0.1:${port}/`);
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** A conversation the client process watches over SSE. */
class Conversation {
  private turns = 0;

  private constructor(
    private readonly client: TurnClient,
    private readonly fake: FakeLlm,
    private readonly id: string,
    private readonly timeline: TurnTimeline,
  ) {}

  /** With `workdir` (a client's own): no warm shell, its shell starts at its creation. */
  static async create(client: TurnClient, server: TestServer, fake: FakeLlm, timeline: TurnTimeline, workdir?: string): Promise<Conversation> {
    const { id } = await client.ask({ type: 'create', url: server.url, headers: server.auth, llm: { model: 'fake-model', base_url: fake.url, api_key: 'sk-bench' }, ...(workdir !== undefined && { workdir }) }, 'created');
    return new Conversation(client, fake, id, timeline);
  }

  /** One message, one `bash true`, one answer (each LLM answer after `llmDelayMs`); resolves when the client saw the run's end on SSE. */
  async turn(llmDelayMs = 0): Promise<{ totalMs: number; httpMs: number; clientCpuMs: number }> {
    const turn = ++this.turns;
    this.fake.setScript([
      { delayMs: llmDelayMs, toolCalls: [{ name: 'bash', arguments: { command: `true # turn ${turn}` } }] },
      { delayMs: llmDelayMs, text: `done ${turn}` },
    ]);
    const reply = await this.client.ask({ type: 'turn', id: this.id, content: `Turn ${turn}: run true.` }, 'turned');
    // The client's instants, on this process's clock (both read CLOCK_MONOTONIC).
    const offset = performance.now() - monotonicMs();
    this.timeline.mark('post', reply.postAt + offset);
    this.timeline.mark('202', reply.acceptedAt + offset);
    this.timeline.mark('sse end', reply.endAt + offset);
    return { totalMs: reply.endAt - reply.postAt, httpMs: reply.acceptedAt - reply.postAt, clientCpuMs: reply.cpuMs };
  }

  close(): void {
    this.client.tell({ type: 'close', id: this.id });
  }
}
