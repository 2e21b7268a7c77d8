import fs from 'node:fs';
import path from 'node:path';
import { startFakeLlm } from '../test/fake-llm/fake-llm-server.js';
import type { Benchmark } from './support/benchmark.js';
import { bashThenAnswer, call, createIdleConversations, sleep } from './support/idle-conversations.js';
import { descendants } from './support/process-census.js';
import { CLI, childScript, startProcess, type StartedProcess } from './support/processes.js';
import { fmt, ratio, summarize } from './support/stats.js';

/**
 * P13: shutdown and DELETE with many idle conversations (each with its sandboxed shell after one
 * run): DELETE latency, SIGTERM to exit, and the worst event-loop stall of the server during each
 * (perf_hooks.monitorEventLoopDelay, preloaded into the server), versus the same with one conversation.
 */
export const p13Shutdown: Benchmark = {
  id: 'P13',
  title: 'shutdown and delete at scale',
  measures: 'DELETE latency, SIGTERM to exit and the worst event-loop stall during each, with 1,000 idle conversations (--quick: 60) versus a few.',
  async run({ quick, tmp }) {
    const size = quick ? 60 : 1000;
    const deletes = quick ? 10 : 30;
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
          fmt(figures.exitMs),
          ratio(figures.exitMs, baseline.exitMs),
          fmt(figures.shutdownStallMs),
          String(figures.processesBefore),
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
          columns: ['', 'DELETE p50 ms', 'DELETE p99 ms', 'DELETE p50 vs baseline', 'worst stall during DELETEs ms', 'SIGTERM → exit ms', 'vs baseline', 'worst stall during shutdown ms', 'processes before', 'sandbox processes left after exit'],
          rows,
        },
      ],
      notes: [
        'Targets at 1,000 conversations: SIGTERM to exit < 5 s, DELETE < 20 ms p50, no event-loop stall over 50 ms during either.',
        'A stall is the worst delay of the server\'s event loop (monitorEventLoopDelay, 5 ms resolution) between the first DELETE and the last answer, and between SIGTERM and exit.',
      ],
    };
  },
};

interface Figures {
  deleteMs: ReturnType<typeof summarize>;
  deleteStallMs: number;
  exitMs: number;
  shutdownStallMs: number;
  processesBefore: number;
  leftAfterExit: number;
}

async function measure(tmp: string, name: string, fake: Awaited<ReturnType<typeof startFakeLlm>>, count: number, deletes: number): Promise<Figures> {
  const dataDir = path.join(tmp, name);
  const loopFile = path.join(tmp, `${name}-loop.jsonl`);
  fs.mkdirSync(dataDir, { recursive: true });
  const server: StartedProcess = await startProcess({
    command: [process.execPath, '--import', childScript('loop-delay'), CLI],
    args: (port) => ['--port', String(port), '--data-dir', dataDir],
    env: { AGENTD_IDLE_TIMEOUT_S: '0', AGENTD_LOG_LEVEL: 'warn', AGENTD_BENCH_LOOP_FILE: loopFile, ...(process.env.AGENTD_BENCH_SHUTDOWN_PROFILE && { AGENTD_BENCH_SHUTDOWN_PROFILE: `${process.env.AGENTD_BENCH_SHUTDOWN_PROFILE}-${name}.cpuprofile` }) },
    probe: '/health',
  });
  const pid = server.child.pid!;
  try {
    const ids = await createIdleConversations(server, fake, 0, count, { network: false });
    await sleep(500);
    const processesBefore = descendants(pid).length;
    const marks = () => (fs.existsSync(loopFile) ? fs.readFileSync(loopFile, 'utf8').trim().split('\n').filter(Boolean).map((line) => JSON.parse(line) as { phase: string; maxMs: number }) : []);
    const marked = async (expected: number) => {
      process.kill(pid, 'SIGUSR2');
      const deadline = performance.now() + 10_000;
      while (marks().length < expected && performance.now() < deadline) await sleep(5);
    };
    await marked(1);
    const deleteMs: number[] = [];
    for (const id of ids.slice(0, deletes)) {
      const started = performance.now();
      const answer = await call(server, 'DELETE', `/conversations/${id}`);
      deleteMs.push(performance.now() - started);
      if (answer.status !== 204) throw new Error(`DELETE: ${answer.status}`);
    }
    await marked(2);
    const deleteStallMs = marks()[1]!.maxMs;
    const exited = new Promise<void>((resolve) => server.child.once('exit', () => resolve()));
    const started = performance.now();
    process.kill(pid, 'SIGTERM');
    await exited;
    const exitMs = performance.now() - started;
    const shutdownStallMs = marks().at(-1)!.maxMs;
    await sleep(300);
    const leftAfterExit = sandboxProcessesOf(dataDir);
    return { deleteMs: summarize(deleteMs), deleteStallMs, exitMs, shutdownStallMs, processesBefore, leftAfterExit };
  } finally {
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
