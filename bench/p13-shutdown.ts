import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startFakeLlm } from '../test/fake-llm/fake-llm-server.js';
import type { Benchmark } from './support/benchmark.js';
import { bashThenAnswer, call, createIdleConversations, sleep } from './support/idle-conversations.js';
import { descendants } from './support/process-census.js';
import { CLI, childScript, startProcess, type StartedProcess } from './support/processes.js';
import { fmt, ratio, summarize } from './support/stats.js';

/** How long after the server's exit its sandboxes have to be gone before one left counts as leaked. */
const SANDBOXES_GONE_WITHIN_MS = 30_000;

/**
 * P13: shutdown and DELETE with many idle conversations (each with its sandboxed shell after one
 * run): DELETE latency, SIGTERM to exit, and the worst event-loop stall of the server during each
 * (perf_hooks.monitorEventLoopDelay, preloaded into the server), versus the same with one conversation.
 */
export const p13Shutdown: Benchmark = {
  id: 'P13',
  title: 'shutdown and delete at scale',
  measures: 'DELETE latency, SIGTERM to exit and the worst event-loop stall during each, with 1,000 idle conversations (--quick: 25) versus a few.',
  async run({ quick, tmp }) {
    // AGENTD_BENCH_P13=<conversations>,<deletes>: other sizes (for iterating on the shutdown path without 4,000 processes).
    const sized = process.env.AGENTD_BENCH_P13?.split(',').map(Number);
    const size = sized?.[0] ?? (quick ? 25 : 1000);
    const deletes = sized?.[1] ?? (quick ? 10 : 30);
    const fake = await startFakeLlm({ whenExhausted: bashThenAnswer });
    const rows: string[][] = [];
    let baseline: Figures | undefined;
    try {
      for (const count of [1 + deletes, size]) {
        const figures = await measure(tmp, `n${count}`, fake, count, deletes);
        baseline ??= figures;
        const label = count === size ? `${size} idle conversations` : `${count} idle conversations (baseline)`;
        rows.push([
          label,
          fmt(figures.deleteMs.p50),
          fmt(figures.deleteMs.p99),
          ratio(figures.deleteMs.p50, baseline.deleteMs.p50),
          fmt(figures.deleteStallMs),
          fmt(figures.deleteStallNetMs),
          fmt(figures.witnessed.deleteMs),
          fmt(figures.exitMs),
          ratio(figures.exitMs, baseline.exitMs),
          fmt(figures.exitCallMs),
          fmt(figures.exitMs - figures.exitCallMs),
          fmt(figures.shutdownStallMs),
          fmt(figures.shutdownStallNetMs),
          `${fmt(figures.witnessed.shutdownMs)} / ${fmt(figures.witnessed.shutdownNetMs)}`,
          String(figures.processesBefore),
          fmt(figures.sandboxesGoneMs),
          String(figures.leftAfterExit),
        ]);
      }
    } finally {
      await fake.close();
    }
    return {
      sizes: `${size} idle conversations after one run each (one \`bash true\`; sandbox without network, see P11 for the network helper's cost), ${deletes} sequential DELETEs, then SIGTERM`,
      tables: [
        {
          caption: 'DELETE and SIGTERM',
          columns: ['', 'DELETE p50 ms', 'DELETE p99 ms', 'DELETE p50 vs baseline', 'worst stall during DELETEs ms', 'less run-queue wait', 'an idle process beside it', 'SIGTERM → exit ms', 'vs baseline', 'of it: the server\'s shutdown (SIGTERM → process.exit) ms', 'the kernel ending the process (process.exit → gone) ms', 'worst stall during shutdown ms', 'less run-queue wait', 'an idle process beside it (wall / less wait)', 'processes before', 'last sandbox process gone, ms after exit', `sandbox processes left ${SANDBOXES_GONE_WITHIN_MS / 1000} s after exit`],
          rows,
        },
      ],
      notes: [
        'Targets at 1,000 conversations: SIGTERM to exit < 5 s, DELETE < 20 ms p50, no event-loop stall over 50 ms during either.',
        'A stall is the worst delay of the server\'s event loop (monitorEventLoopDelay, 5 ms resolution) between the first DELETE and the last answer, and between SIGTERM and exit (up to the exit itself: the last stretch before process.exit, which no timer of the histogram follows, is counted from the 5 ms timer\'s last tick).',
        'SIGTERM → exit is split at the server\'s process.exit call (its time from the exit mark of the preloaded watcher). After it no JavaScript runs: the kernel closes the server\'s descriptors (the sandboxes\' pipes among them) and the process is gone. A sandbox (four processes and its namespaces) ends at the end of its script or control pipe, which the server\'s spawner holds too: it ends them once the server is gone, so that their teardown does not share the machine with the server\'s exit (until the seventy-third session it did, and the kernel\'s part took ~8 s at 1,000 on an AMD EPYC guest). The sandboxes end after the server: the last of their processes is gone the given ms after its exit (looked for every 50 ms by their command lines), and none may be left after 30 s.',
        '"Less run-queue wait": the worst delay of a 5 ms timer in the server less the time its main thread waited for a CPU meanwhile (/proc/thread-self/schedstat): what the server itself held its loop for, the figure a quiet machine shows; on a loaded machine the wall-time stall is mostly other processes\' turn. "An idle process beside it": the same measures of an idle Node process through the same phases, the machine\'s share (other work, the kernel tearing the sandboxes down).',
      ],
    };
  },
};

interface Figures {
  deleteMs: ReturnType<typeof summarize>;
  deleteStallMs: number;
  deleteStallNetMs: number;
  exitMs: number;
  /** SIGTERM to the server's process.exit call (its own shutdown; the rest is the kernel's). */
  exitCallMs: number;
  shutdownStallMs: number;
  shutdownStallNetMs: number;
  /** The witness's worst stalls in the same phases (an idle process beside the server). */
  witnessed: { deleteMs: number; shutdownMs: number; shutdownNetMs: number };
  processesBefore: number;
  /** From the server's exit until no process of its sandboxes is left (they end on their pipes' end of file). */
  sandboxesGoneMs: number;
  /** Still there SANDBOXES_GONE_WITHIN_MS after the exit: a leak. */
  leftAfterExit: number;
}

interface LoopMark {
  phase: string;
  /** When the mark was written, epoch ms (the exit mark: when process.exit was called). */
  atMs: number;
  maxMs: number;
  maxNetMs: number;
  worstTick: unknown;
}

/** A process's loop-delay marks (children/loop-delay.ts) and a way to ask for the next one. */
function loopWatch(file: string, pid: () => number) {
  const marks = (): LoopMark[] => (fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim().split('\n').filter(Boolean).map((line) => JSON.parse(line) as LoopMark) : []);
  return {
    marks,
    async mark(expected: number): Promise<void> {
      process.kill(pid(), 'SIGUSR2');
      const deadline = performance.now() + 10_000;
      while (marks().length < expected && performance.now() < deadline) await sleep(5);
    },
  };
}

async function measure(tmp: string, name: string, fake: Awaited<ReturnType<typeof startFakeLlm>>, count: number, deletes: number): Promise<Figures> {
  const dataDir = path.join(tmp, name);
  const loopFile = path.join(tmp, `${name}-loop.jsonl`);
  const witnessFile = path.join(tmp, `${name}-witness.jsonl`);
  fs.mkdirSync(dataDir, { recursive: true });
  const server: StartedProcess = await startProcess({
    command: [process.execPath, '--import', childScript('loop-delay'), CLI],
    args: (port) => ['--port', String(port), '--data-dir', dataDir],
    env: { AGENTD_IDLE_TIMEOUT_S: '0', AGENTD_LOG_LEVEL: 'warn', AGENTD_BENCH_LOOP_FILE: loopFile, ...(process.env.AGENTD_BENCH_SHUTDOWN_PROFILE && { AGENTD_BENCH_SHUTDOWN_PROFILE: `${process.env.AGENTD_BENCH_SHUTDOWN_PROFILE}-${name}.cpuprofile` }) },
    probe: '/health',
  });
  // The witness: an idle Node process watched the same way through the same phases. Its worst
  // stall is the machine's (other processes, the kernel tearing down the sandboxes), not the server's.
  const witness = spawn(process.execPath, ['--import', childScript('loop-delay'), '-e', 'setInterval(() => {}, 1 << 30); process.on("SIGTERM", () => process.exit(0));'], { env: { ...process.env, AGENTD_BENCH_LOOP_FILE: witnessFile }, stdio: 'ignore' });
  const pid = server.child.pid!;
  try {
    const ids = await createIdleConversations(server, fake, 0, count, { network: false });
    await sleep(500);
    const processesBefore = descendants(pid).length;
    const loop = loopWatch(loopFile, () => pid);
    const beside = loopWatch(witnessFile, () => witness.pid!);
    await Promise.all([loop.mark(1), beside.mark(1)]);
    const deleteMs: number[] = [];
    for (const id of ids.slice(0, deletes)) {
      const started = performance.now();
      const answer = await call(server, 'DELETE', `/conversations/${id}`);
      deleteMs.push(performance.now() - started);
      if (answer.status !== 204) throw new Error(`DELETE: ${answer.status}`);
    }
    await Promise.all([loop.mark(2), beside.mark(2)]);
    const { maxMs: deleteStallMs, maxNetMs: deleteStallNetMs } = loop.marks()[1]!;
    const exited = new Promise<void>((resolve) => server.child.once('exit', () => resolve()));
    const started = performance.now();
    process.kill(pid, 'SIGTERM');
    await exited;
    const exitMs = performance.now() - started;
    await beside.mark(3);
    const { maxMs: shutdownStallMs, maxNetMs: shutdownStallNetMs, worstTick, atMs: exitCalledAt } = loop.marks().at(-1)!;
    const exitCallMs = exitCalledAt - (performance.timeOrigin + started);
    const witnessed = { deleteMs: beside.marks()[1]?.maxMs ?? NaN, shutdownMs: beside.marks()[2]?.maxMs ?? NaN, shutdownNetMs: beside.marks()[2]?.maxNetMs ?? NaN };
    if (process.env.AGENTD_BENCH_SHUTDOWN_PROFILE) process.stderr.write(`P13 ${name}: worst shutdown tick ${JSON.stringify(worstTick)}, witness ${JSON.stringify(beside.marks()[2])}\n`);
    // The sandboxes end after the server, each on its pipes' end of file: how long the last takes,
    // and whether any is left (a count at a fixed moment could not tell one still ending from a leak).
    let leftAfterExit = sandboxProcessesOf(dataDir);
    while (leftAfterExit > 0 && performance.now() - started - exitMs < SANDBOXES_GONE_WITHIN_MS) {
      await sleep(50);
      leftAfterExit = sandboxProcessesOf(dataDir);
    }
    const sandboxesGoneMs = leftAfterExit === 0 ? performance.now() - started - exitMs : NaN;
    return { deleteMs: summarize(deleteMs), deleteStallMs, deleteStallNetMs, exitMs, exitCallMs, shutdownStallMs, shutdownStallNetMs, witnessed, processesBefore, sandboxesGoneMs, leftAfterExit };
  } finally {
    witness.kill('SIGKILL');
    await server.stop();
  }
}

/** Processes whose command line names the data dir (bwrap's arguments name the workdir under it). */
function sandboxProcessesOf(dataDir: string): number {
  let found = 0;
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (fs.readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(dataDir)) found += 1;
    } catch {
      // gone
    }
  }
  return found;
}
