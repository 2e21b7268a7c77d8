import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { BashShellFactory } from '../src/adapters/bash-shell.js';
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
  measures: 'ms per trivial command (`true`) through the bash tool and its long-lived shell, versus spawning `bash -c true` for every command.',
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
    return {
      sizes: `${commands.toLocaleString('en-US')} commands per variant, in ${rounds} interleaved rounds`,
      tables: [{ columns: ['variant', 'p50 ms', 'p99 ms', 'mean ms', 'commands/s', 'mean vs baseline'], rows }],
      notes: [`The bash tool runs a trivial command in ${ratio(tool.mean, baseline.mean)} the time of spawning \`bash -c\` (${fmt(tool.mean)} ms vs ${fmt(baseline.mean)} ms).`],
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
