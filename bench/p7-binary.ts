import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Benchmark } from './support/benchmark.js';
import { CLI, ROOT, memoryOf, startProcess } from './support/processes.js';
import { fmt, median, megabytes, ratio, spread } from './support/stats.js';

const BINARY = path.join(ROOT, 'dist', 'agentd');
const BUILD_SCRIPT = path.join(ROOT, 'scripts', 'build-binary.mjs');
/** What dist/agentd is built from: as test/cli/binary.test.ts lists them. */
const BUILD_INPUTS = ['src', 'package-lock.json', 'scripts/build-binary.mjs', 'scripts/binary-runtime.mjs', 'scripts/build-ui.mjs', 'scripts/perf'].map((name) => path.join(ROOT, name));

/**
 * P7: the single executable (`npm run build:binary`) from spawn to `/alive` 200, versus
 * `node dist/cli.js`. Uses dist/agentd when it is newer than its sources, else builds it there
 * first, as the binary tests do (so that the next run, or `npm test` after it, finds it fresh);
 * skipped when it cannot be built.
 */
export const p7Binary: Benchmark = {
  id: 'P7',
  title: 'binary start-up',
  measures: 'time from spawning the single executable `dist/agentd` to the first `/alive` 200 (and its RSS), versus `node dist/cli.js`.',
  async run({ quick, tmp }) {
    const rounds = quick ? 2 : 7;
    const sizes = `median of ${rounds} starts each, alternating, empty data dir, run from an empty directory`;
    const binary = findOrBuild();
    if ('skipped' in binary) return { sizes, tables: [], notes: [], skipped: binary.skipped };

    const programs = [
      { label: 'baseline: `node dist/cli.js`', command: [process.execPath, CLI] },
      { label: `single executable${binary.built ? ' (built for this run)' : ' `dist/agentd`'}`, command: [binary.path] },
    ];
    const starts = programs.map(() => [] as { readyMs: number; rss: number }[]);
    const versions = programs.map(() => [] as number[]);
    for (let round = 0; round < rounds; round++) {
      for (const [i, program] of programs.entries()) {
        const cwd = fs.mkdtempSync(path.join(tmp, 'cwd-'));
        const server = await startProcess({ command: program.command, args: (port) => ['--port', String(port), '--data-dir', path.join(cwd, 'data')], cwd, env: { HOME: cwd }, probe: '/alive' });
        try {
          starts[i]!.push({ readyMs: server.readyMs, rss: memoryOf(server.child.pid!).rss });
        } finally {
          await server.stop();
        }
        versions[i]!.push(await timeToExit(program.command, cwd));
      }
    }
    const ready = starts.map((list) => median(list.map((start) => start.readyMs)));
    const rss = starts.map((list) => median(list.map((start) => start.rss)));
    const version = versions.map((list) => median(list));
    const rows = programs.map((program, i) => [program.label, spread(starts[i]!.map((start) => start.readyMs)), ratio(ready[i]!, ready[0]!), megabytes(rss[i]!), ratio(rss[i]!, rss[0]!), fmt(version[i]!), ratio(version[i]!, version[0]!)]);
    return {
      sizes,
      tables: [{ columns: ['program', 'to /alive ms: median (min–max)', 'vs node', 'RSS MiB', 'vs node', '`--version` ms', 'vs node'], rows }],
      notes: [
        `The single executable answers \`/alive\` ${ratio(ready[1]!, ready[0]!)} as long after spawn as \`node dist/cli.js\` (${fmt(ready[1]!)} ms vs ${fmt(ready[0]!)} ms); \`--version\` (start, load, exit) isolates the module loading.`,
        `Binary: ${megabytes(fs.statSync(binary.path).size)} MiB${binary.built ? `, built in ${fmt(binary.buildMs / 1000)} s for this run (dist/agentd was missing or older than its sources)` : ''}.`,
      ],
    };
  },
};

function newestChange(file: string): number {
  const stat = fs.statSync(file);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(stat.mtimeMs, ...fs.readdirSync(file).map((name) => newestChange(path.join(file, name))));
}

/**
 * dist/agentd when fresh; else built in place. build-binary.mjs works in a directory of its own
 * and renames the finished binary into place, so a build racing another (the binary tests')
 * never leaves a partial file: the last rename wins, both built from the same sources.
 */
function findOrBuild(): { path: string; built: boolean; buildMs: number } | { skipped: string } {
  if (fs.existsSync(BINARY) && fs.statSync(BINARY).mtimeMs > Math.max(...BUILD_INPUTS.filter((file) => fs.existsSync(file)).map(newestChange))) {
    return { path: BINARY, built: false, buildMs: 0 };
  }
  if (!fs.existsSync(BUILD_SCRIPT)) return { skipped: 'dist/agentd is missing or stale and scripts/build-binary.mjs does not exist' };
  const started = performance.now();
  const build = spawnSync(process.execPath, [BUILD_SCRIPT], { cwd: ROOT, encoding: 'utf8', timeout: 180_000 });
  if (build.status !== 0 || !fs.existsSync(BINARY)) {
    const why = (build.stderr || build.stdout || build.error?.message || `exit ${build.status}`).trim().split('\n').slice(-3).join(' ');
    return { skipped: `npm run build:binary failed: ${why}` };
  }
  return { path: BINARY, built: true, buildMs: performance.now() - started };
}

/** From spawn to exit of `<program> --version`, in ms. */
function timeToExit(command: readonly string[], cwd: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(command[0]!, [...command.slice(1), '--version'], { cwd, stdio: 'ignore' });
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(performance.now() - started) : reject(new Error(`${command.join(' ')} --version exited ${code}`))));
  });
}
