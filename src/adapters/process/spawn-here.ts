import { spawn } from 'node:child_process';
import { Readable, type Writable } from 'node:stream';
import type { SpareStart } from './process-launcher.js';
import { signalQuietly } from './process-tree.js';

// What the server spawns and runs from its own process: when there is no spawner (process-spawner.ts), or it could not start.

export interface SpawnRequest {
  command: string;
  args: readonly string[];
  cwd: string;
  env: Record<string, string>;
  /** The leader of a new session and process group (child_process's `detached`). */
  detached: boolean;
  stdio: ReadonlyArray<'pipe' | 'ignore'>;
  /** The same start from a spare process, which the spawner may hold (see SpareStart); spawnHere ignores it. */
  spare?: SpareStart;
  /**
   * Pipes (by descriptor) whose end the spawner keeps a copy of until the process exits, so that
   * the server's exit is no end of file for them: the spawner ends the process once the server is
   * gone (spawner-main.ts). Only for pipes whose end of file the server never uses as a message
   * while it runs. spawnHere ignores it.
   */
  held?: readonly number[];
}

/** A spawned process: a ChildProcess, or the spawner's stand-in for one (the same events, pid and pipes). */
export interface SpawnedProcess {
  readonly pid?: number | undefined;
  readonly stdio: ReadonlyArray<Readable | Writable | null | undefined>;
  once(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): unknown;
  once(event: 'error', listener: (error: Error) => void): unknown;
}

export type SpawnProcess = (request: SpawnRequest) => Promise<SpawnedProcess>;

/** A short program run to its end (the checkpoints' git): `input` on its stdin, its output collected. */
export interface RunRequest {
  command: string;
  args: readonly string[];
  cwd: string;
  env: Record<string, string>;
  input?: string;
  /** Past this much on stdout it is killed. */
  maxOutputBytes: number;
  /** Past this it is killed. */
  timeoutMs: number;
}

/** Exit code -1: not started, killed at a limit, or by a signal; stderr then says why when the program said nothing. */
export interface RunResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

export type RunProcess = (request: RunRequest) => Promise<RunResult>;

/**
 * Calls `listener` once the process has exited and each of its output pipes has closed (what a
 * ChildProcess's 'close' event says), with its exit code and signal.
 */
export function onClose(child: SpawnedProcess, listener: (code: number | null, signal: NodeJS.Signals | null) => void): void {
  const outputs = child.stdio.slice(1).filter((stream): stream is Readable => stream instanceof Readable && !stream.destroyed);
  let waiting = outputs.length + 1;
  let exit: [number | null, NodeJS.Signals | null] = [null, null];
  const done = (): void => {
    waiting -= 1;
    if (waiting === 0) listener(...exit);
  };
  for (const stream of outputs) stream.once('close', done);
  child.once('exit', (code, signal) => {
    exit = [code, signal];
    done();
  });
}

/** Spawned by this process itself (a fork of the whole server: see ProcessSpawner). */
export const spawnHere: SpawnProcess = (request) => {
  const child = spawn(request.command, [...request.args], { cwd: request.cwd, env: request.env, detached: request.detached, stdio: [...request.stdio] });
  if (child.pid !== undefined) return Promise.resolve(child);
  // Not started: child_process tells why on the next tick, before the caller could listen; it is
  // told again once the caller has had the process.
  return new Promise((resolve) =>
    child.once('error', (error) => {
      resolve(child);
      setImmediate(() => child.emit('error', error));
    }),
  );
};

/** Run by this process itself: spawned here, its output collected. */
export const runHere: RunProcess = async (request) => {
  try {
    const child = await spawnHere({ command: request.command, args: request.args, cwd: request.cwd, env: request.env, detached: false, stdio: [request.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    return await collect(child, request);
  } catch (error) {
    return { stdout: '', stderr: error instanceof Error ? error.message : String(error), exitCode: -1 };
  }
};

/** A spawned program's output and exit code, `input` written to its stdin; killed at the request's limits. */
function collect(child: SpawnedProcess, request: RunRequest): Promise<RunResult> {
  const name = request.command.split('/').pop();
  return new Promise((resolve) => {
    const [stdin, stdout, stderr] = child.stdio as [Writable | null, Readable, Readable];
    const outChunks: Buffer[] = [];
    const errChunks: Buffer[] = [];
    let outBytes = 0;
    let stopped = '';
    const stop = (reason: string): void => {
      stopped ||= reason;
      if (child.pid !== undefined) signalQuietly(child.pid, 'SIGKILL');
    };
    const timer = setTimeout(() => stop(`${name} timed out after ${request.timeoutMs / 1000} s`), request.timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      resolve({ stdout: '', stderr: error.message, exitCode: -1 });
    });
    stdout.on('data', (chunk: Buffer) => {
      outBytes += chunk.length;
      if (outBytes > request.maxOutputBytes) stop(`${name} printed more than ${request.maxOutputBytes} bytes`);
      else outChunks.push(chunk);
    });
    stderr.on('data', (chunk: Buffer) => errChunks.push(chunk));
    onClose(child, (code, signal) => {
      clearTimeout(timer);
      const text = Buffer.concat(errChunks).toString('utf8');
      const failed = stopped || (code === null ? `${name} was killed (${signal ?? 'signal'})` : '');
      resolve({ stdout: Buffer.concat(outChunks).toString('utf8'), stderr: text || failed, exitCode: failed ? -1 : (code ?? -1) });
    });
    if (stdin) {
      // It may exit before it read everything (a bad argument): its stdin is then closed.
      stdin.on('error', () => undefined);
      stdin.end(request.input);
    }
  });
}
