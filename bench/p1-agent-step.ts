import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { OpenAiLlmClient } from '../src/adapters/llm/openai-llm.js';
import type { ShellFactory } from '../src/core/tools/shell-session.js';
import type { AgentEvent } from '../src/core/schemas/event.js';
import { startFakeLlm, type FakeLlm, type FakeTurn } from '../test/fake-llm/fake-llm-server.js';
import { fork, type ChildProcess } from 'node:child_process';
import type { SseWatcherReply, SseWatcherRequest } from './children/sse-watcher.js';
import { startServer, type TestServer } from '../test/support/agentd.js';
import type { Benchmark } from './support/benchmark.js';
import { EventTap, Meter, meterEvents, timedLlm, timedShells } from './support/instrumented.js';
import { childScript } from './support/processes.js';
import { shellsRunAs } from './support/machine.js';
import { fmt, ratio, summarize } from './support/stats.js';
import { cpuMs, StepFloor, type FloorCpu } from './support/step-floor.js';

const ROUNDS = 4;

/**
 * P1: the agent loop's own cost per step. A scripted fake LLM answers at once with one
 * `bash true` call per turn; ms per step is compared with the floor: one fake-LLM round trip
 * with the step's own request (the run's recorded requests sent again through the same client)
 * plus one command in an already-running shell, each measured alone in the same process. The
 * run goes in rounds (one message each, same conversation) alternating with floor samples, so
 * that load elsewhere on the machine hits both alike. The earlier floor (a request like the
 * run's first at every step) is kept as a row.
 */
export const p1AgentStep: Benchmark = {
  id: 'P1',
  title: 'agent step overhead',
  measures:
    'ms per agent step (fake LLM answering at once with one `bash true` call) with a breakdown (LLM call, tool, event append, fan-out), versus the floor: one fake-LLM round trip with the step\'s own request (replayed) plus one command in an already-running shell, measured alone.',
  async run({ quick, tmp }) {
    const steps = quick ? 60 : 200;
    const floorSamples = quick ? 60 : 200;
    const llm = new Meter();
    const tool = new Meter();
    const fake = await startFakeLlm({ whenExhausted: { text: 'done' } });
    const tap = new EventTap();
    // The server's own shells (its sandbox when it has one, spawned by its spawner), timed.
    let ownShells: ShellFactory | undefined;
    const server = await startServer({ overrides: { llm: timedLlm(new OpenAiLlmClient(), llm), wrapShells: (shells) => timedShells((ownShells = shells), tool), readers: [tap] } });
    const events = meterEvents(server.services.recorder);
    let floor: StepFloor | undefined;
    try {
      const warmup = await startConversation({ server, fake, tap });
      await warmup.run(20);
      await warmup.close();
      floor = await StepFloor.start({ fake, firstRequest: fake.requests[0]!, workdir: path.join(tmp, 'floor-workdir'), shells: ownShells! });
      for (const meter of [llm, tool, events.append]) Object.assign(meter, { ms: 0, calls: 0 });

      const conversation = await startConversation({ server, fake, tap });
      const stepMs: number[] = [];
      let totalMs = 0;
      let runCpuMs = 0;
      const profile = process.env.AGENTD_BENCH_P1_PROFILE ?? (process.env.AGENTD_BENCH_P1_PERF && 'perf');
      for (let round = 0; round < ROUNDS; round++) {
        await profiled(profile && path.join(profile, `floor-first-${round}.cpuprofile`), () => floor!.sample(floorSamples / ROUNDS));
        const cpu = process.cpuUsage();
        const sent = fake.requests.length;
        const run = await profiled(profile && path.join(profile, `run-${round}.cpuprofile`), () => conversation.run(steps / ROUNDS));
        runCpuMs += cpuMs(cpu);
        stepMs.push(...run.stepMs);
        totalMs += run.totalMs;
        // The same requests again, alone: each step's (the last one, answered with text, ends the run).
        const stepRequests = fake.requests.slice(sent, sent + steps / ROUNDS);
        await profiled(profile && path.join(profile, `floor-${round}.cpuprofile`), () => floor!.replay(stepRequests));
      }
      await conversation.close();

      const perStep = totalMs / steps;
      const part = (meter: Meter) => meter.ms / steps;
      const other = perStep - part(llm) - part(tool) - part(events.append);
      const share = (ms: number) => `${((ms / perStep) * 100).toFixed(1)}%`;
      const floorLlm = summarize(floor.llmMs);
      const firstLlm = summarize(floor.firstLlmMs);
      const floorShell = summarize(floor.shellMs);
      const floorP50 = floorLlm.p50 + floorShell.p50;
      const floorMean = floorLlm.mean + floorShell.mean;
      const firstP50 = firstLlm.p50 + floorShell.p50;
      const firstMean = firstLlm.mean + floorShell.mean;
      const cpuOf = (part: FloorCpu) => part.ms / part.samples;
      const stepCpu = runCpuMs / steps;
      const floorCpu = cpuOf(floor.cpu.llm) + cpuOf(floor.cpu.shell);
      const firstCpu = cpuOf(floor.cpu.firstLlm) + cpuOf(floor.cpu.shell);
      const stepSummary = summarize(stepMs);
      const tenth = Math.max(1, Math.floor(steps / 10));
      const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
      const lastBody = JSON.stringify(fake.requests[fake.requests.length - 2]!.body).length;
      return {
        sizes: `${steps} steps in ${ROUNDS} runs of one conversation, alternating with ${floorSamples} floor samples of each part (after a 20-step warm-up)`,
        tables: [
          {
            caption: 'Where a step goes (one LLM turn + one bash call; the runs\' total time / steps)',
            columns: ['part', 'ms/step', 'share'],
            rows: [
              ['LLM call (client + fake server, streamed)', fmt(part(llm)), share(part(llm))],
              ['tool (bash `true` in the conversation shell)', fmt(part(tool)), share(part(tool))],
              [`event append (log write, fan-out to 1 SSE subscriber, bookkeeping; ${fmt(events.append.calls / steps)} events/step)`, fmt(part(events.append)), share(part(events.append))],
              ['other (history, tool dispatch, run record, SSE writes, scheduling)', fmt(other), share(other)],
              ['total step', fmt(perStep), '100%'],
            ],
          },
          {
            caption: 'Step versus its floor',
            columns: ['', 'p50 ms', 'mean ms', 'p50 vs floor', 'mean vs floor'],
            rows: [
              ['agent step', fmt(stepSummary.p50), fmt(perStep), ratio(stepSummary.p50, floorP50), ratio(perStep, floorMean)],
              ['floor: fake-LLM round trip alone, the step\'s own request (replayed)', fmt(floorLlm.p50), fmt(floorLlm.mean), '', ''],
              ['floor: `true` in a running shell alone', fmt(floorShell.p50), fmt(floorShell.mean), '', ''],
              ['floor (sum)', fmt(floorP50), fmt(floorMean), '×1', '×1'],
              ['earlier floor: round trip with a request like the run\'s first (system + one user message)', fmt(firstLlm.p50), fmt(firstLlm.mean), '', ''],
              ['agent step vs the earlier floor (its round trip + the shell\'s)', fmt(stepSummary.p50), fmt(perStep), ratio(stepSummary.p50, firstP50), ratio(perStep, firstMean)],
            ],
          },
          {
            // Under load the wall times above move with the machine; CPU time moves much less.
            caption: 'CPU of the bench process (agent, LLM client and the in-process fake LLM; the shell\'s own CPU is not in it)',
            columns: ['', 'CPU ms', 'vs floor'],
            rows: [
              ['agent step (the runs\' CPU / steps)', fmt(stepCpu), ratio(stepCpu, floorCpu)],
              ['floor: fake-LLM round trip alone, the step\'s own request (replayed)', fmt(cpuOf(floor.cpu.llm)), ''],
              ['floor: `true` in a running shell alone', fmt(cpuOf(floor.cpu.shell)), ''],
              ['agent\'s own CPU per step (step − floor)', fmt(stepCpu - floorCpu), ''],
              ['earlier floor: round trip with a request like the run\'s first', fmt(cpuOf(floor.cpu.firstLlm)), ''],
              ['agent step vs the earlier floor', fmt(stepCpu), ratio(stepCpu, firstCpu)],
            ],
          },
          {
            caption: 'Over the conversation (each request carries the whole history)',
            columns: ['steps', 'mean ms', 'p99 ms'],
            rows: [
              ['step 1 (starts the conversation\'s shell)', fmt(stepMs[0]!), ''],
              [`steps 2–${tenth + 1}`, fmt(mean(stepMs.slice(1, tenth + 1))), ''],
              [`last ${tenth} steps (request body ${fmt(lastBody / 1024)} KiB)`, fmt(mean(stepMs.slice(-tenth))), ''],
              [`all ${steps} steps`, fmt(stepSummary.mean), fmt(stepSummary.p99)],
            ],
          },
        ],
        notes: [
          `An agent step costs ${ratio(stepSummary.p50, floorP50)} its floor at the median (${fmt(stepSummary.p50)} ms vs ${fmt(floorP50)} ms; means ${ratio(perStep, floorMean)}); the agent's own work (append + fan-out + other) is ${fmt(perStep - part(llm) - part(tool))} ms a step.`,
          `One LLM call inside the run takes ${fmt(llm.ms / llm.calls)} ms against ${fmt(floorLlm.mean)} ms for the same requests replayed alone through the same client (${fmt(firstLlm.mean)} ms for a request like the run's first: the run's carry the whole history, which the fake server, in this process as in the tests, parses and checks). Each run also ends with one answer turn (${ROUNDS} over the ${steps} steps), counted in the totals.`,
          `The agent's shells, the floor's too, run ${shellsRunAs(server.services.sandbox)}: the server's own, as \`agentd\` runs them on this machine.`,
          `The floor's LLM round trip is the step's own request sent again alone (since round 2's fourth session); the earlier floor sent a request like the run's first whatever the step, so the history's share of the round trip (the fake's parse, the body's transfer) counted as the agent's overhead. Both are shown.`,
        ],
      };
    } finally {
      await floor?.close();
      await server.close();
      await fake.close();
    }
  },
};

/**
 * AGENTD_BENCH_P1_PROFILE=<dir>: a CPU profile of each round's run and of its floor samples, apart
 * (<dir>/run-N, floor-N, floor-first-N). V8's profiler samples wall time, so on a loaded machine
 * it also counts the time the process waits for a core; AGENTD_BENCH_P1_PERF=<ctl-fifo>,<ack-fifo>
 * instead turns `perf record --control fifo:<ctl-fifo>,<ack-fifo> -D -1` (CPU time only; run node with
 * --perf-basic-prof) on during the runs, or during the replayed floor with AGENTD_BENCH_P1_PERF_PART=floor.
 */
let perfFds: { ctl: number; ack: number } | undefined;

async function profiled<T>(file: string | undefined, work: () => Promise<T>): Promise<T> {
  const perf = process.env.AGENTD_BENCH_P1_PERF;
  if (perf && file && path.basename(file).startsWith(`${process.env.AGENTD_BENCH_P1_PERF_PART ?? 'run'}-`)) {
    const [ctl, ack] = perf.split(',') as [string, string];
    perfFds ??= { ctl: fs.openSync(ctl, 'w'), ack: fs.openSync(ack, 'r') };
    const command = (word: string) => {
      fs.writeSync(perfFds!.ctl, `${word}\n`);
      fs.readSync(perfFds!.ack, Buffer.alloc(16));
    };
    command('enable');
    try {
      return await work();
    } finally {
      command('disable');
    }
  }
  if (!file || perf) return work();
  const inspector = await import('node:inspector/promises');
  const session = new inspector.Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 100 });
  await session.post('Profiler.start');
  try {
    return await work();
  } finally {
    const { profile } = await session.post('Profiler.stop');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, JSON.stringify(profile));
    session.disconnect();
  }
}

interface AgentConversation {
  /** Sends one message; resolves when its run of `steps` bash calls (and a final answer) ends. */
  run(steps: number): Promise<{ totalMs: number; stepMs: number[] }>;
  /** Once its subscriber has received every event of the conversation, in order. */
  close(): Promise<void>;
}

/** A conversation with the fake LLM and one SSE subscriber, as a client would watch it. */
async function startConversation(options: { server: TestServer; fake: FakeLlm; tap: EventTap }): Promise<AgentConversation> {
  const { server, fake, tap } = options;
  const headers = { ...server.auth, 'content-type': 'application/json' };
  const created = await fetch(`${server.url}/conversations`, { method: 'POST', headers, body: JSON.stringify({ llm: { model: 'fake-model', base_url: fake.url, api_key: 'sk-bench' } }) });
  if (created.status !== 201) throw new Error(`POST /conversations: ${created.status} ${await created.text()}`);
  const { id } = (await created.json()) as { id: string };
  const subscriber = await SseWatcher.watch(`${server.url}/conversations/${id}/events/stream`, server.auth);
  let stepCounter = 0;
  return {
    async run(steps) {
      const script: FakeTurn[] = Array.from({ length: steps }, () => ({ toolCalls: [{ name: 'bash', arguments: { command: `true # step ${++stepCounter}` } }] }));
      fake.setScript([...script, { text: 'done' }]);
      const actionTimes: number[] = [];
      let endedAt = 0;
      let ended!: () => void;
      const runEnded = new Promise<void>((resolve) => (ended = resolve));
      const unsubscribe = tap.on((appended) => {
        const event: AgentEvent = appended.event;
        if (event.conversation_id !== id) return;
        if (event.kind === 'action') actionTimes.push(performance.now());
        if (event.kind === 'state_update' && event.status !== 'running') {
          endedAt = performance.now();
          ended();
        }
      });
      const started = performance.now();
      const posted = await fetch(`${server.url}/conversations/${id}/messages`, { method: 'POST', headers, body: JSON.stringify({ content: 'Run the commands.', run: true }) });
      if (posted.status !== 202) throw new Error(`POST /messages: ${posted.status} ${await posted.text()}`);
      await runEnded;
      unsubscribe();
      if (actionTimes.length !== steps) throw new Error(`expected ${steps} actions, saw ${actionTimes.length} (fake LLM violations: ${fake.violations.join('; ') || 'none'})`);
      return { totalMs: endedAt - started, stepMs: actionTimes.map((time, i) => time - (i === 0 ? started : actionTimes[i - 1]!)) };
    },
    async close() {
      const stored = await server.services.storage.log.lastSeq(id);
      for (const deadline = Date.now() + 10_000; ; ) {
        const received = await subscriber.received();
        if (received >= stored) break;
        if (Date.now() > deadline) throw new Error(`P1's SSE subscriber received ${received} of ${stored} events`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      subscriber.close();
    },
  };
}

/**
 * The conversation's SSE subscriber: a client in a process of its own (children/sse-watcher.ts),
 * as a dashboard is. Until round 2's fifteenth session it read the stream in this process, so its
 * parsing (fetch's web streams, text decoding) ran on the server's event loop and counted as the
 * agent's overhead: ×0.05-0.1 of P1's ratio.
 *
 * It runs at the lowest priority (nice 19): a dashboard runs on another machine, and on this one
 * the watcher woken by each SSE write was scheduled on the server's core and ran its parsing
 * before the server's next instruction (a `write` to its socket took 70-110 µs instead of
 * 40-50 µs, and the LLM round trip in a step 0.1 ms more). The write itself, and the wake-up,
 * still count.
 */
class SseWatcher {
  private constructor(private readonly child: ChildProcess) {}

  static async watch(url: string, headers: Record<string, string>): Promise<SseWatcher> {
    const child = fork(childScript('sse-watcher'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    os.setPriority(child.pid!, 19);
    const watcher = new SseWatcher(child);
    await watcher.ask({ type: 'watch', url, headers }, 'watching');
    return watcher;
  }

  /** The events it received; it fails if an id did not follow the one before. */
  async received(): Promise<number> {
    const reply = await this.ask({ type: 'count' }, 'counted');
    if (reply.faults.length > 0) throw new Error(`P1's SSE subscriber: ${reply.faults.join('; ')}`);
    return reply.ids;
  }

  close(): void {
    this.child.send({ type: 'stop' } satisfies SseWatcherRequest);
  }

  private ask<T extends SseWatcherReply['type']>(request: SseWatcherRequest, expected: T): Promise<Extract<SseWatcherReply, { type: T }>> {
    return new Promise((resolve, reject) => {
      const exited = () => reject(new Error('the SSE watcher exited'));
      this.child.once('exit', exited);
      this.child.once('message', (reply: SseWatcherReply) => {
        this.child.off('exit', exited);
        if (reply.type === expected) resolve(reply as Extract<SseWatcherReply, { type: T }>);
        else reject(new Error(`SSE watcher: ${reply.type === 'failed' ? reply.message : reply.type}`));
      });
      this.child.send(request);
    });
  }
}
