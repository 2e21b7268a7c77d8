import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BashShellFactory } from '../src/adapters/shell/bash-shell.js';
import { ProcessSpawner } from '../src/adapters/process/process-spawner.js';
import { executeTool } from '../src/core/agent/tool-executor.js';
import { bashTool } from '../src/core/tools/bash.js';
import type { ShellSession } from '../src/core/tools/shell-session.js';
import type { ToolDefinition } from '../src/core/tools/tool.js';
import type { Benchmark } from './support/benchmark.js';
import { fmt, ratio, summarize } from './support/stats.js';
import { NodeWorkdirFileSystem } from '../src/adapters/workspace/node-workdir-file-system.js';

/**
 * P6: trivial commands through the bash tool (the conversation's long-lived shell) versus
 * spawning `bash -c` for each command, the way a tool without a persistent shell would.
 */
export const p6Shell: Benchmark = {
  id: 'P6',
  title: 'shell',
  measures:
    'ms per trivial command (`true`) through the bash tool and its long-lived shell, versus spawning `bash -c true` for every command; and shell starts from a process grown to a large server\'s size, through the spawner versus spawned by the process itself: wall time and the worst event-loop stall.',
  async run({ quick, tmp }) {
    const commands = quick ? 200 : 1000;
    const workdir = fs.mkdtempSync(path.join(tmp, 'workdir-'));
    const shell = await new BashShellFactory().create({ conversationId: 'bench', workdir, env: {} });
    const tools = new Map<string, ToolDefinition>([['bash', bashTool as ToolDefinition]]);
    const context = { conversationId: 'bench', workdir, workdirFs: new NodeWorkdirFileSystem(), signal: new AbortController().signal, shell: async () => shell, state: new Map<string, unknown>() };
    const limits = { timeoutMs: 30_000, idleTimeoutMs: 30_000 };

    const viaTool = async () => {
      const result = await executeTool({ tools, name: 'bash', args: { ok: true, value: { command: 'true' } }, context });
      if (result.isError) throw new Error(`bash tool failed: ${result.content}`);
    };
    const viaShell = async () => {
      const result = await shell.run('true', limits);
      if (result.exitCode !== 0) throw new Error(`shell failed: ${result.output}`);
    };
    const viaSpawn = () => spawnBash(workdir);

    const variants = [
      { name: 'bash tool (executeTool → long-lived shell)', run: viaTool, samples: [] as number[] },
      { name: 'long-lived shell alone (ShellSession.run)', run: viaShell, samples: [] as number[] },
      { name: 'baseline: spawn `bash -c true` each time', run: viaSpawn, samples: [] as number[] },
    ];
    // Warm up, then interleave rounds so that a burst of load elsewhere hits every variant alike.
    for (const variant of variants) for (let i = 0; i < 20; i++) await variant.run();
    const rounds = 10;
    for (let round = 0; round < rounds; round++) {
      for (const variant of variants) {
        for (let i = 0; i < commands / rounds; i++) {
          const started = performance.now();
          await variant.run();
          variant.samples.push(performance.now() - started);
        }
      }
    }
    await (shell as ShellSession).close();

    const baseline = summarize(variants[2]!.samples);
    const rows = variants.map((variant) => {
      const s = summarize(variant.samples);
      const total = variant.samples.reduce((sum, value) => sum + value, 0);
      return [variant.name, fmt(s.p50), fmt(s.p99), fmt(s.mean), fmt((variant.samples.length / total) * 1000), ratio(s.mean, baseline.mean)];
    });
    const tool = summarize(variants[0]!.samples);
    const starts = await shellStarts(workdir, quick);
    return {
      sizes: `${commands.toLocaleString('en-US')} commands per variant, in ${rounds} interleaved rounds; ${starts.count} shell starts per variant at ${starts.rssMiB} MiB RSS`,
      tables: [
        { columns: ['variant', 'p50 ms', 'p99 ms', 'mean ms', 'commands/s', 'mean vs baseline'], rows },
        {
          caption: `Shell starts (host shells, one at a time) from this process grown to ${starts.rssMiB} MiB RSS, a large server's size`,
          columns: ['variant', 'start p50 ms', 'start p99 ms', 'worst event-loop stall ms', 'stall vs baseline'],
          rows: starts.rows,
        },
      ],
      notes: [
        `The bash tool runs a trivial command in ${ratio(tool.mean, baseline.mean)} the time of spawning \`bash -c\` (${fmt(tool.mean)} ms vs ${fmt(baseline.mean)} ms).`,
        'Node spawns by forking the calling process, and copying the page tables of a large one blocks its event loop; the server has its shells spawned by a small process of its own (ProcessSpawner) instead. A stall is the longest gap between two turns of a 1 ms timer while the shells start.',
      ],
    };
  },
};

/** One `bash -c true` in the workdir, its output collected, resolved on exit. */
function spawnBash(cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', 'true'], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.resume();
    child.stderr.resume();
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`bash -c exited ${code}`))));
  });
}

/**
 * Shell starts (create, first answer, close) with this process grown to a large server's size:
 * through a ProcessSpawner, and spawned here (the baseline), interleaved.
 */
async function shellStarts(workdir: string, quick: boolean): Promise<{ count: number; rssMiB: string; rows: string[][] }> {
  const count = quick ? 20 : 60;
  // Touched memory, as a server holding many conversations has: buffers and small objects.
  const ballast: unknown[] = Array.from({ length: quick ? 120 : 200 }, (_, index) => Buffer.alloc(1 << 20, index + 1));
  for (let index = 0; index < 1_000_000; index++) ballast.push({ index, text: `item ${index}` });
  const spawner = new ProcessSpawner();
  const variants = [
    { name: 'through the spawner (the server)', factory: new BashShellFactory({ spawn: spawner.spawn }), starts: [] as number[], worst: 0 },
    { name: 'baseline: spawned by this process', factory: new BashShellFactory(), starts: [] as number[], worst: 0 },
  ];
  const startOnce = async (variant: (typeof variants)[number]) => {
    let last = performance.now();
    let worst = 0;
    const timer = setInterval(() => {
      const now = performance.now();
      worst = Math.max(worst, now - last);
      last = now;
    }, 1);
    const started = performance.now();
    const shell = await variant.factory.create({ conversationId: 'bench-start', workdir, env: {} });
    variant.starts.push(performance.now() - started);
    clearInterval(timer);
    variant.worst = Math.max(variant.worst, worst, performance.now() - last);
    await shell.close();
  };
  try {
    // The spawner's own start is not a shell start: once before the measured ones.
    for (const variant of variants) await startOnce(variant);
    for (const variant of variants) (variant.starts.length = 0), (variant.worst = 0);
    for (let index = 0; index < count; index++) for (const variant of variants) await startOnce(variant);
  } finally {
    spawner.close();
  }
  const rssMiB = fmt(process.memoryUsage().rss / 1048576);
  ballast.length = 0;
  const baselineWorst = variants[1]!.worst;
  const rows = variants.map((variant) => {
    const s = summarize(variant.starts);
    return [variant.name, fmt(s.p50), fmt(s.p99), fmt(variant.worst), ratio(variant.worst, baselineWorst)];
  });
  return { count, rssMiB, rows };
}
