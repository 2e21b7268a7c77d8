import { fork, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { SERVER_NODE_FLAGS } from '../../scripts/perf/server-node-flags.mjs';
import type { BenchReport } from './benchmark.js';

/** Where this code runs from: dist/bench/ (scripts/bench.mjs bundles bench/ there), two levels below the repository. */
const BUNDLE_DIR = import.meta.dirname;
export const ROOT = path.resolve(BUNDLE_DIR, '../..');
export const CLI = path.join(ROOT, 'dist', 'cli.js');
export const BENCH_KEY = 'bench-master-key';

/** A program of bench/children/, as bundled beside the runner. */
export function childScript(name: string): string {
  return path.join(BUNDLE_DIR, 'children', `${name}.mjs`);
}

/** The runner itself (run.ts, bundled): `--child <id>` runs one benchmark in a fresh process. */
const RUNNER = path.join(BUNDLE_DIR, 'run.mjs');

/**
 * One benchmark run by the runner in a fresh process, so that one's heap and JIT state do not
 * colour the next: its report. `execPath`: another Node to run it on; `quiet`: its printed tables
 * not shown (the report still comes).
 */
export function runBenchmarkInChild(id: string, options: { quick: boolean; execPath?: string; env?: NodeJS.ProcessEnv; quiet?: boolean }): Promise<BenchReport> {
  return new Promise((resolve, reject) => {
    const child = fork(RUNNER, ['--child', id, ...(options.quick ? ['--quick'] : [])], {
      ...(options.execPath !== undefined && { execPath: options.execPath }),
      ...(options.env !== undefined && { env: options.env }),
      stdio: options.quiet ? ['ignore', 'ignore', 'inherit', 'ipc'] : 'inherit',
    });
    let report: BenchReport | undefined;
    child.on('message', (message: { report?: BenchReport }) => (report = message.report ?? report));
    child.on('error', reject);
    child.on('exit', (code) => (report ? resolve(report) : reject(new Error(`${id} failed (exit ${code})`))));
  });
}

export interface StartedProcess {
  child: ChildProcess;
  url: string;
  /** From spawn() to the first 200 of the probed path, in ms. */
  readyMs: number;
  stop(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** As scripts/start.mjs and the Dockerfile set it (test/cli/malloc-tunables.test.ts checks they agree). */
export const SERVER_GLIBC_TUNABLES = 'glibc.malloc.mmap_threshold=131072';

/** AGENTD_BENCH_GLIBC_TUNABLES=<tunables>: the benchmarks' servers run with these instead (to weigh another allocator setting). */
const benchGlibcTunables = process.env.AGENTD_BENCH_GLIBC_TUNABLES ?? SERVER_GLIBC_TUNABLES;

/**
 * The Node options a server started as `node dist/cli.js` runs with: npm start's, the Docker
 * image's and the single executable's (scripts/perf/server-node-flags.mjs).
 * AGENTD_BENCH_NODE_FLAGS="<options>" runs them with these instead ("": none), to weigh another.
 */
const benchNodeFlags = process.env.AGENTD_BENCH_NODE_FLAGS === undefined ? SERVER_NODE_FLAGS : process.env.AGENTD_BENCH_NODE_FLAGS.split(' ').filter(Boolean);

/**
 * Starts a server process (`node dist/cli.js`, with the server's Node options, the single
 * executable, a bench child) on a free loopback port and polls `probe` every 2 ms until it answers 200. Output goes to /dev/null
 * unless `keepOutput`, so that logging costs what it costs in production (a write per line).
 */
export async function startProcess(options: {
  command: readonly string[];
  args?: (port: number) => string[];
  env?: Record<string, string>;
  cwd?: string;
  probe: string;
  timeoutMs?: number;
  /**
   * Give each probe this long before it is dropped and sent again, doubling after each drop (up
   * to 5 s): for a server that can leave a request made while it starts unanswered. Default: a
   * probe waits for its answer.
   */
  probeTimeoutMs?: number;
}): Promise<StartedProcess> {
  const port = await freePort();
  const [program, ...leading] = options.command;
  const nodeFlags = leading.includes(CLI) ? benchNodeFlags : [];
  const started = performance.now();
  const child = spawn(program!, [...nodeFlags, ...leading, ...(options.args?.(port) ?? ['--port', String(port)])], {
    cwd: options.cwd ?? os.tmpdir(),
    // The allocator's setting the Docker image and `npm start` run the server with (docs/operations.md, "Memory").
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: os.homedir(), AGENTD_MASTER_KEY: BENCH_KEY, GLIBC_TUNABLES: benchGlibcTunables, ...options.env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const deadline = started + (options.timeoutMs ?? 60_000);
  let probeTimeoutMs = options.probeTimeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${program} exited early (${child.exitCode ?? child.signalCode}): ${stderr.trim()}`);
    const status = await statusOf(`${url}${options.probe}`, probeTimeoutMs);
    if (status === 200) break;
    if (status === 'timeout' && probeTimeoutMs !== undefined) probeTimeoutMs = Math.min(5000, probeTimeoutMs * 2);
    if (performance.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`${program} did not answer ${options.probe}: ${stderr.trim()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  const readyMs = performance.now() - started;
  return {
    child,
    url,
    readyMs,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

async function statusOf(url: string, timeoutMs?: number): Promise<number | 'timeout' | null> {
  try {
    const response = await request(url, { reset: true, ...(timeoutMs !== undefined && { headersTimeout: timeoutMs, bodyTimeout: timeoutMs }) });
    await response.body.dump();
    return response.statusCode;
  } catch (error) {
    return (error as { code?: string }).code === 'UND_ERR_HEADERS_TIMEOUT' || (error as { code?: string }).code === 'UND_ERR_BODY_TIMEOUT' ? 'timeout' : null;
  }
}

/** Resident set size and its peak of a process, in bytes (Linux /proc). */
export function memoryOf(pid: number): { rss: number; peak: number } {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const field = (name: string) => Number(/\s(\d+) kB/.exec(status.split('\n').find((line) => line.startsWith(`${name}:`)) ?? '')?.[1] ?? Number.NaN) * 1024;
  return { rss: field('VmRSS'), peak: field('VmHWM') };
}

/** CPU time (user + system) a process has used so far, in ms (Linux /proc). */
export function cpuTimeOf(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  return (ticks * 1000) / 100;
}

/**
 * The CPU time (ms) of a process's main thread alone, to the nanosecond (/proc's schedstat): the
 * JavaScript thread, without V8's and libuv's helper threads that run beside it on other cores.
 */
export function mainThreadCpuOf(pid: number): number {
  return Number(fs.readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
}

/**
 * Promise.all for starting several processes at once, but every start has settled before the
 * first failure is thrown: a caller that lists each started process as it comes up (to stop them
 * all afterwards) has every one of them in its list by then.
 */
export async function settled<T extends readonly unknown[]>(promises: { [K in keyof T]: Promise<T[K]> }): Promise<T> {
  const results = await Promise.allSettled(promises);
  const failed = results.find((result) => result.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((result) => (result as PromiseFulfilledResult<unknown>).value) as unknown as T;
}
