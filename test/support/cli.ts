import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';

export const CLI = path.resolve(import.meta.dirname, '../../dist/cli.js');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface CliProcess {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  done: Promise<CliResult>;
}

/** `node dist/cli.js <args>` with only the variables given (plus PATH, HOME, no colours); stdin from `input` or none. */
export interface CliOptions {
  env?: Record<string, string>;
  cwd?: string;
  input?: string;
  /** Another program taking the same arguments (the single executable); default `node dist/cli.js`. */
  command?: readonly string[];
}

export function startCli(args: string[], options: CliOptions = {}): CliProcess {
  const [program, ...leading] = options.command ?? [process.execPath, CLI];
  const child = spawn(program!, [...leading, ...args], {
    cwd: options.cwd ?? os.tmpdir(),
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: os.tmpdir(), NO_COLOR: '1', ...options.env },
    stdio: [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
  });
  if (options.input !== undefined) child.stdin!.end(options.input);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const done = new Promise<CliResult>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  return { child, stdout: () => stdout, stderr: () => stderr, done };
}

export function runCli(args: string[], options: CliOptions = {}): Promise<CliResult> {
  return startCli(args, options).done;
}
