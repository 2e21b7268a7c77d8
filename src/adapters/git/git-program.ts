import path from 'node:path';
import type { ProcessLauncher } from '../process/process-launcher.js';
import type { RunProcess, RunResult } from '../process/process-spawner.js';
import { runHere } from '../process/spawn-here.js';
import { findInPath, shellWord } from '../sandbox/mounts.js';

const TIMEOUT_MS = 300_000;
/** Where the shadow repository is bound inside a conversation's sandbox (a name no host path is needed for). */
export const SANDBOX_GIT_DIR = '/.agentd-shadow.git';

/**
 * Runs the server's own git (never the agent's: not in the sandbox, on the data dir) with
 * nothing from the outside world that could make it execute something: no system or global
 * config, no config from the environment (GIT_CONFIG_*), no hooks, no fsmonitor, no attribute
 * files but the shadow's own `info/attributes`, literal pathspecs. The workdir it reads is
 * written by the agent, so every knob that would run a program is pinned off here.
 */
export const SAFE_CONFIG = [
  'core.hooksPath=/dev/null',
  'core.fsmonitor=false',
  'core.attributesFile=/dev/null',
  'core.excludesFile=/dev/null',
  'core.symlinks=true',
  'core.autocrlf=false',
  'core.safecrlf=false',
  'core.filemode=true',
  'core.ignoreCase=false',
  'core.quotePath=false',
  'core.untrackedCache=true',
  'core.splitIndex=false',
  'core.sparseCheckout=false',
  'core.bare=false',
  'gc.auto=0',
  'diff.external=',
  'diff.noprefix=false',
  'diff.mnemonicPrefix=false',
  'diff.relative=false',
  'status.showUntrackedFiles=all',
  'safe.directory=*',
  'protocol.allow=never',
  'submodule.recurse=false',
  'user.name=agentd',
  'user.email=agentd@localhost',
];

/** Exit code -1: git could not be started, was killed (at the time limit, past the output limit), or died of a signal. */
export type GitResult = RunResult;

export class GitError extends Error {
  constructor(
    readonly args: readonly string[],
    readonly result: GitResult,
  ) {
    super(`git ${args.find((arg) => !arg.startsWith('-') && !arg.includes('=')) ?? ''} failed (exit ${result.exitCode}): ${result.stderr.trim().slice(0, 500)}`);
    this.name = 'GitError';
  }
}

/** What git may print before it is stopped (a diff of a large tree is the most it prints). */
const MAX_OUTPUT_BYTES = 512 * 1024 * 1024;

export async function runGit(options: {
  gitDir: string;
  workTree?: string;
  args: readonly string[];
  input?: string;
  indexFile?: string;
  allowExit?: readonly number[];
  /** Runs git (the server's ProcessSpawner: git runs there to its end). Default: run by this process. */
  run?: RunProcess;
  /**
   * Runs git inside the work tree's sandbox: the agent's uid, a mount namespace holding the work
   * tree and the shadow repository (at SANDBOX_GIT_DIR) and nothing else of the host. A symlink
   * the agent swaps in then leads only to what the agent can reach itself.
   */
  sandbox?: ProcessLauncher;
  /** A bash script to run instead of git (runGitPair), with the repository's path in $AGENTD_GIT_DIR. */
  shell?: string;
}): Promise<GitResult> {
  const sandboxed = options.sandbox !== undefined && options.workTree !== undefined && options.indexFile === undefined;
  const gitDir = sandboxed ? SANDBOX_GIT_DIR : options.gitDir;
  const args = [
    '--git-dir', gitDir,
    ...(options.workTree ? ['--work-tree', options.workTree] : []),
    '--no-replace-objects',
    ...SAFE_CONFIG.flatMap((entry) => ['-c', entry]),
    ...options.args,
  ];
  const request = {
    command: options.shell === undefined ? 'git' : 'bash',
    args: options.shell === undefined ? args : ['--norc', '--noprofile', '-c', options.shell, 'agentd-git'],
    cwd: options.workTree ?? path.dirname(options.gitDir),
    env: { ...gitEnv(gitDir, options.indexFile), ...(options.shell !== undefined && { AGENTD_GIT_DIR: gitDir }) },
    ...(options.input !== undefined && { input: options.input }),
    maxOutputBytes: MAX_OUTPUT_BYTES,
    timeoutMs: TIMEOUT_MS,
  };
  const run = options.run ?? runHere;
  let out: GitResult;
  if (sandboxed) {
    const launcher = options.sandbox as ProcessLauncher;
    const sandbox = { workdir: options.workTree as string, network: false };
    await launcher.ready?.(sandbox);
    await launcher.beforeStart?.(sandbox);
    const prepared = launcher.prepare({ ...request, sandbox, binds: [{ source: options.gitDir, target: SANDBOX_GIT_DIR }], light: true });
    try {
      out = await run({ ...request, command: prepared.command, args: prepared.args, cwd: prepared.cwd, env: prepared.env });
    } finally {
      prepared.release?.();
    }
  } else out = await run(request);
  if (out.exitCode !== 0 && !(options.allowExit ?? []).includes(out.exitCode)) throw new GitError(options.args, out);
  return out;
}

/** Printed between the two commands of runGitPair: git never prints a NUL around a line of its own. */
const PAIR_SEPARATOR = '\0agentd-next\0';

/**
 * Two git commands on the same repository and work tree in one process start (in a sandbox a
 * start is most of a small checkpoint's cost): `second` runs when `first` exits 0 or 1, and each
 * answers with its own output. `input` goes to `first`; `fallback`, when given, runs in its place
 * when `first` fails, and its own exit counts. A failure of either throws GitError as runGit does.
 */
export async function runGitPair(options: {
  gitDir: string;
  workTree: string;
  first: readonly string[];
  fallback?: readonly string[];
  second: readonly string[];
  input?: string;
  run?: RunProcess;
  sandbox?: ProcessLauncher;
}): Promise<{ first: GitResult; second: GitResult }> {
  const prefix = (args: readonly string[]) => ['git', '--git-dir', '"$AGENTD_GIT_DIR"', '--work-tree', shellWord(options.workTree), '--no-replace-objects', ...SAFE_CONFIG.flatMap((entry) => ['-c', shellWord(entry)]), ...args.map(shellWord)].join(' ');
  // The fallback reads no input: stdin stays with the first command, which read it all or failed.
  const firstStep = options.fallback === undefined ? prefix(options.first) : `${prefix(options.first)} || ${prefix(options.fallback)} </dev/null`;
  const script = [firstStep, 's=$?', 'if [ "$s" -gt 1 ]; then exit "$s"; fi', `printf '\\0agentd-next\\0'`, `${prefix(options.second)} || exit`, 'exit "$s"'].join('\n');
  const out = await runGit({ ...options, args: options.first, shell: script, allowExit: [1] });
  const at = out.stdout.indexOf(PAIR_SEPARATOR);
  if (at < 0) throw new GitError(options.first, out);
  const first = { ...out, stdout: out.stdout.slice(0, at), exitCode: out.exitCode };
  return { first, second: { ...out, stdout: out.stdout.slice(at + PAIR_SEPARATOR.length), exitCode: 0 } };
}

/**
 * Where runGit's `git` is, or null when it is not installed: looked up on the PATH git runs with,
 * by a stat of each entry, where running `git --version` forked the server (a pause of its event
 * loop that grows with its heap) at its first checkpoint.
 */
export function installedGit(): string | null {
  return findInPath('git', serverPath());
}

/**
 * The server's PATH, its absolute entries only: git runs (and is looked up) with the agent's
 * workdir as its current directory, where a relative or empty entry (`.`, `a::b`) would find a
 * `git` (or a program git runs) that the agent wrote.
 */
function serverPath(): string {
  return (process.env.PATH ?? '/usr/bin:/bin').split(':').filter((dir) => path.isAbsolute(dir)).join(':');
}

/** A clean environment: PATH to find git, and the switches that shut out every outside config. */
function gitEnv(gitDir: string, indexFile: string | undefined): Record<string, string> {
  return {
    PATH: serverPath(),
    HOME: gitDir,
    XDG_CONFIG_HOME: `${gitDir}/no-xdg`,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_CONFIG_SYSTEM: '/dev/null',
    GIT_ATTR_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_LITERAL_PATHSPECS: '1',
    GIT_NO_REPLACE_OBJECTS: '1',
    GIT_OPTIONAL_LOCKS: '1',
    LC_ALL: 'C',
    ...(indexFile ? { GIT_INDEX_FILE: indexFile } : {}),
  };
}
