import { userInfo } from 'node:os';

/**
 * The one place that turns "start this program in workdir W with env E" into what is actually
 * spawned. The sandbox (bubblewrap) wraps this later: it rewrites the spec into
 * `bwrap <binds...> -- command args`, so every agent process goes through `prepare`.
 */
export interface ProcessSpec {
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
}

export interface ProcessLauncher {
  prepare(spec: ProcessSpec): ProcessSpec;
}

/** No sandbox: the program runs on the host as the server's user, exactly as asked. */
export class HostProcessLauncher implements ProcessLauncher {
  prepare(spec: ProcessSpec): ProcessSpec {
    return { command: spec.command, args: [...spec.args], cwd: spec.cwd, env: { ...spec.env } };
  }
}

export interface CleanEnvOptions {
  workdir: string;
  /** HOME for the agent; defaults to the workdir. */
  homeDir?: string;
  /** Names of server variables the operator chose to pass through (AGENTD_PASS_ENV). */
  passEnv?: string[];
  /** Explicit variables (the conversation's secrets, ...): applied last, they win. */
  extra?: Record<string, string>;
  /** Where PATH, LANG and passEnv values are read from; defaults to the server's environment. */
  hostEnv?: Record<string, string | undefined>;
}

const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * An allowlisted environment for agent processes. Nothing else of the server's environment is
 * inherited (no AGENTD_*, no OPENAI_*, no API keys) unless its name is listed in `passEnv`.
 */
export function buildCleanEnv(options: CleanEnvOptions): Record<string, string> {
  const hostEnv = options.hostEnv ?? process.env;
  const user = currentUserName();
  const env: Record<string, string> = {
    PATH: hostEnv.PATH || DEFAULT_PATH,
    LANG: hostEnv.LANG || 'C.UTF-8',
    TERM: 'dumb',
    HOME: options.homeDir ?? options.workdir,
    SHELL: '/bin/bash',
  };
  if (hostEnv.LC_ALL) env.LC_ALL = hostEnv.LC_ALL;
  if (user) {
    env.USER = user;
    env.LOGNAME = user;
  }
  for (const name of options.passEnv ?? []) {
    const value = hostEnv[name];
    if (value !== undefined) env[name] = value;
  }
  return { ...env, ...options.extra };
}

function currentUserName(): string | undefined {
  try {
    return userInfo().username;
  } catch {
    return undefined;
  }
}
