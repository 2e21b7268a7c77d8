import { userInfo } from 'node:os';
import { hasRlimits, NO_LIMITS, ulimitStatements, type LimitEnforcement, type ResourceLimits } from '../sandbox/resource-limits.js';

/**
 * The one place that turns "start this program in workdir W with env E" into what is actually
 * spawned. The sandbox (bwrap-launcher.ts) rewrites the spec into `bwrap <binds...> -- command
 * args`, so every agent process goes through `prepare`.
 */
export interface ProcessSpec {
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  /** The conversation's side of the sandbox; without it the workdir is `cwd`, with network. */
  sandbox?: SandboxRequest;
  /**
   * A long-lived program (the shell) whose sandbox takes orders from the server: when the
   * prepared process has a `controlFd`, the spawner passes a pipe there and writes `r` when a
   * command starts and `i` when it ends (sandbox/entry-script.ts). Its program is a bash that
   * reads its commands on stdin, and it runs the prepared process's `shellPrelude` first. Default false.
   */
  control?: boolean;
  /**
   * The sandbox's workdir set-up (see ProcessLauncher.ready) is left for a later `ready` call:
   * a shell started ahead of its first command. Default false: done here when not done yet.
   */
  setupLater?: boolean;
  /**
   * Host directories bound read-write at `target` inside the sandbox, for work the server does
   * there on the agent's side of the boundary (the shadow repository of checkpoints). Ignored
   * without a sandbox.
   */
  binds?: readonly { source: string; target: string }[];
  /**
   * The server's own short program (git on the workdir), not the agent's: the same walls (mount,
   * pid, network namespaces, the agent's uid, no capability, the seccomp filter, the cgroups) but
   * a light start: only the system's programs, the loader's cache, /etc/gitconfig, /dev, /proc,
   * the workdir and `binds`; no /etc allowlist, no watchdog, no rlimits (the caller bounds its
   * time and output). Ignored with `control`.
   */
  light?: boolean;
}

export interface SandboxRequest {
  /** The one directory of the host the program sees (read-write, at its real path). */
  workdir: string;
  /**
   * true: a network namespace with user-mode networking (the internet, not the host's loopback);
   * false: no network (only a loopback interface of its own); 'host': the host's network.
   */
  network: boolean | 'host';
}

/** What to spawn. */
export interface PreparedProcess {
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  /**
   * How many processes the launcher puts between the spawned one and the program (0: the spawned
   * process is the program; bwrap: 2, its monitor and the init of the pid namespace), each the
   * oldest child of the one before, one in a pid namespace of its own first (the monitor's other
   * child, a user-mode network's helper, is older). They are in the spawned process's group and
   * ignore SIGINT.
   */
  programDepth: number;
  /** Call once the spawned process has exited (frees what the launcher set up for it). */
  release?: () => void;
  /** Where the spawned process expects the control pipe (only when the spec asked for `control`). */
  controlFd?: number;
  /**
   * Lines for the program (a shell: the spec asked for `control`) to run before anything else:
   * the launcher's part of the start that may overlap the program's own (the wait for a
   * sandbox's network, which the program's start no longer waits for: see bwrap-launcher.ts).
   */
  shellPrelude?: string;
  /** The same start made from a spare process (see SpareStart); absent when it cannot be. */
  spare?: SpareStart;
}

/**
 * A prepared process started another way: `command args` (and an empty environment, `/` as
 * the current directory) are the same for every process a launcher prepares alike, so a spawner
 * may have one such process started before it is asked for (ProcessSpawner). Given `script` on
 * fd `scriptFd` (then end of file), the spare runs it and becomes the prepared process: its
 * directory, its environment, its program. A fork and two program starts (a good part of a
 * shell's start) are then behind it when the start is asked for.
 */
export interface SpareStart {
  command: string;
  args: string[];
  scriptFd: number;
  script: string;
}

export type SandboxMode = 'bwrap' | 'none';

export interface ProcessLauncher {
  readonly mode: SandboxMode;
  readonly limits: ResourceLimits;
  /** What enforces each limit here (reported by /info). */
  readonly enforcement: LimitEnforcement;
  prepare(spec: ProcessSpec): PreparedProcess;
  /**
   * The slow part of preparing a sandbox for a workdir (e.g. giving it to the agent's uid), done
   * without blocking the event loop: a `prepare` after it finds it done. Optional to call.
   */
  ready?(sandbox: SandboxRequest): Promise<void>;
  /**
   * What a start can have done off the event loop just before its spawn (the sandbox's cgroup
   * directories made: its launch then starts no mkdir, a process on the start's path). Optional
   * to call; never rejects.
   */
  beforeStart?(sandbox: SandboxRequest): Promise<void>;
  /**
   * Who a workdir's sandboxed processes run as when they are not the server's own user (a server
   * running as root), for what the server writes on their side (the checkpoints' repository);
   * null: the server's own user.
   */
  runsAs?(workdir: string): { uid: number; gid: number } | null;
  /** The workdir's conversation is deleted: what was kept about the workdir goes (it stayed for the process's life). */
  forget?(workdir: string): void;
  /** The server stops, its sandboxes killed: the cgroups it made for them are removed once empty (bounded wait). */
  removeCgroups?(): Promise<void>;
  /** The server exits next without waiting for its killed sandboxes: their cgroups are removed by a process that outlives it. */
  removeCgroupsAfterExit?(): void;
}

/**
 * No sandbox: the program runs on the host as the server's user. Limits, when configured, are
 * set by `bash -c 'ulimit ...; exec "$@"'` (the program keeps the spawned pid); the process
 * limit is ignored by the kernel when the server runs as root; there is no private /tmp.
 */
export class HostProcessLauncher implements ProcessLauncher {
  readonly mode = 'none';
  readonly limits: ResourceLimits;
  readonly enforcement: LimitEnforcement;

  constructor(options: { limits?: ResourceLimits } = {}) {
    this.limits = options.limits ?? NO_LIMITS;
    const limited = (value: number | null, by: 'rlimit' | 'server') => (value === null ? 'none' : by);
    this.enforcement = Object.freeze({
      cpuSeconds: limited(this.limits.cpuSeconds, 'rlimit'),
      memoryMb: limited(this.limits.memoryMb, 'rlimit'),
      processes: process.geteuid?.() === 0 ? 'none' : limited(this.limits.processes, 'rlimit'),
      fileMb: limited(this.limits.fileMb, 'rlimit'),
      tmpMb: 'none',
      workdirMb: limited(this.limits.workdirMb, 'server'),
    });
  }

  prepare(spec: ProcessSpec): PreparedProcess {
    const base = { cwd: spec.cwd, env: { ...spec.env }, programDepth: 0 };
    if (!hasRlimits(this.limits)) return { ...base, command: spec.command, args: [...spec.args] };
    return { ...base, command: 'bash', args: ['-c', `${ulimitStatements(this.limits)}; exec "$@"`, 'agentd-limits', spec.command, ...spec.args] };
  }
}

export interface CleanEnvOptions {
  workdir: string;
  /** HOME for the agent; defaults to the workdir. */
  homeDir?: string;
  /** Names of server variables the operator chose to pass through (AGENTD_PASS_ENV). */
  passEnv?: readonly string[];
  /** Explicit variables (the conversation's secrets, ...): applied last, they win. */
  extra?: Record<string, string>;
  /**
   * Where PATH, LANG, LC_ALL and the passEnv values are read from: the part of the server's
   * environment that config.ts captured (config.agentEnv.hostEnv). Never process.env itself.
   */
  hostEnv?: Readonly<Record<string, string | undefined>>;
}

const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * An allowlisted environment for agent processes. Nothing else of the server's environment is
 * inherited (no AGENTD_*, no OPENAI_*, no API keys) unless its name is listed in `passEnv`.
 */
export function buildCleanEnv(options: CleanEnvOptions): Record<string, string> {
  const hostEnv = options.hostEnv ?? {};
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
