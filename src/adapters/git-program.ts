import path from 'node:path';
import { lazyModule } from './lazy-module.js';

const TIMEOUT_MS = 300_000;
/** execa loads at the first git run (a checkpoint), not at start-up. */
const loadExeca = lazyModule(() => import('execa'));

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

export interface GitResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

export class GitError extends Error {
  constructor(
    readonly args: readonly string[],
    readonly result: GitResult,
  ) {
    super(`git ${args.find((arg) => !arg.startsWith('-') && !arg.includes('=')) ?? ''} failed (exit ${result.exitCode}): ${result.stderr.trim().slice(0, 500)}`);
    this.name = 'GitError';
  }
}

export async function runGit(options: { gitDir: string; workTree?: string; args: readonly string[]; input?: string; indexFile?: string; allowExit?: readonly number[] }): Promise<GitResult> {
  const args = [
    '--git-dir', options.gitDir,
    ...(options.workTree ? ['--work-tree', options.workTree] : []),
    '--no-replace-objects',
    ...SAFE_CONFIG.flatMap((entry) => ['-c', entry]),
    ...options.args,
  ];
  const { execa } = await loadExeca();
  const result = await execa('git', args, {
    env: gitEnv(options.gitDir, options.indexFile),
    extendEnv: false,
    cwd: options.workTree ?? path.dirname(options.gitDir),
    reject: false,
    stripFinalNewline: false,
    encoding: 'utf8',
    maxBuffer: 512 * 1024 * 1024,
    timeout: TIMEOUT_MS,
    ...(options.input !== undefined ? { input: options.input } : { stdin: 'ignore' as const }),
  });
  // No exit code: git could not be started (not installed, a bad cwd), or was killed at the timeout.
  const out = { stdout: String(result.stdout ?? ''), stderr: String(result.stderr ?? '') || (result.exitCode === undefined ? (result.message ?? '') : ''), exitCode: result.exitCode ?? -1 };
  if (out.exitCode !== 0 && !(options.allowExit ?? []).includes(out.exitCode)) throw new GitError(options.args, out);
  return out;
}

/** A clean environment: PATH to find git, and the switches that shut out every outside config. */
function gitEnv(gitDir: string, indexFile: string | undefined): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
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
