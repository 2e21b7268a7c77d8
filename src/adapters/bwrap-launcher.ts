import path from 'node:path';
import type { PreparedProcess, ProcessLauncher, ProcessSpec } from './process-launcher.js';
import type { ResourceLimits } from './resource-limits.js';
import { sandboxEntryScript } from './sandbox-entry-script.js';
import { SANDBOX_USER, SandboxIdentityFiles } from './sandbox-identity.js';
import { systemMountArgs } from './sandbox-mounts.js';
import { BWRAP_INFO_FD, userModeWrapperScript, waitForNetworkScript, type NetworkHelper } from './sandbox-network.js';

export interface BwrapLauncherOptions {
  /** Absolute path of the bwrap binary. */
  bwrapPath: string;
  limits: ResourceLimits;
  /** The server's data dir, workdir base and key files: never visible inside. */
  hiddenPaths: readonly string[];
  /** Operator-chosen read-only paths (AGENTD_SANDBOX_RO_PATHS). */
  extraReadOnlyPaths?: readonly string[];
  /** Where the sandbox user's passwd/group/gitconfig files are written (inside the data dir). */
  stateDir: string;
  /** PATH used to locate the tools whose installation must be visible (git, rg, ...). */
  searchPath: string;
  /** Tools the agent relies on; node defaults to the server's own binary. */
  tools?: string[];
  /** Whether the server runs as root (default: its effective uid is 0). */
  runningAsRoot?: boolean;
  /** The user-mode network stack for `network: true`; null: such sandboxes get no network. */
  networkHelper?: NetworkHelper | null;
}

/**
 * Runs every agent process inside bubblewrap:
 * - its own mount namespace: system directories and an allowlist of /etc read-only, the workdir
 *   read-write at its real path, a private /tmp, /var/tmp and /dev/shm (sized by the memory limit),
 *   its own /proc and a minimal /dev; nothing else of the host exists inside;
 * - its own pid namespace (`--unshare-pid`): the sandbox's init dies with the program and takes
 *   every process of the sandbox with it; `--die-with-parent`: a server killed with -9 takes its
 *   sandboxes along; a network namespace unless the conversation has `network: 'host'`, with
 *   user-mode networking attached from outside for `network: true` (sandbox-network.ts);
 * - as root: all capabilities dropped but those the entry script needs to switch to the agent's
 *   own uid (sandbox-identity.ts) and to stop the sandbox; the agent itself keeps only
 *   CAP_DAC_OVERRIDE and CAP_FOWNER (see sandbox-entry-script.ts). Not root: a user namespace
 *   with the server's uid, no capabilities.
 * No `--new-session`: bwrap, its init and the program stay in the spawned process group (an
 * interactive bash then makes itself the leader of a group of its own, which bash-process.ts
 * finds and signals). A SIGINT to the spawned group would kill bwrap's monitor and the sandbox
 * with it, so bwrap runs with SIGINT ignored (`env --ignore-signal=INT`) and the entry script
 * restores it for the program. Inherited file descriptors (the shell's fd 3) pass through
 * bwrap unchanged.
 */
export class BwrapProcessLauncher implements ProcessLauncher {
  readonly mode = 'bwrap';
  readonly limits: ResourceLimits;
  private readonly systemArgs: string[];
  private readonly identities: SandboxIdentityFiles;
  private readonly asRoot: boolean;

  constructor(private readonly options: BwrapLauncherOptions) {
    this.limits = options.limits;
    this.asRoot = options.runningAsRoot ?? process.geteuid?.() === 0;
    this.identities = new SandboxIdentityFiles(options.stateDir);
    this.systemArgs = systemMountArgs({
      tools: options.tools ?? [process.execPath, 'git', 'rg', 'bash', 'env', 'setpriv', 'mkfifo'],
      searchPath: options.searchPath,
      extraReadOnly: options.extraReadOnlyPaths ?? [],
      hidden: options.hiddenPaths,
    });
  }

  prepare(spec: ProcessSpec): PreparedProcess {
    const workdir = spec.sandbox?.workdir ?? spec.cwd;
    const identity = this.asRoot ? this.identities.forWorkdir(workdir) : null;
    const files = identity?.files ?? this.identities.forServerUser();
    const network = spec.sandbox?.network ?? true;
    const userMode = network === true && this.options.networkHelper ? this.options.networkHelper : null;
    const entry = sandboxEntryScript({ limits: this.limits, runAs: identity && { uid: identity.uid, gid: identity.gid } });
    const tmpSize = this.limits.memoryMb === null ? [] : ['--size', String(this.limits.memoryMb * 1024 * 1024)];
    const args = [
      '--die-with-parent',
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-cgroup-try',
      // See sandbox-network.ts: 'host' shares the host's network; anything else gets a namespace.
      ...(network === 'host' ? [] : ['--unshare-net']),
      ...(userMode ? ['--info-fd', String(BWRAP_INFO_FD)] : []),
      ...(this.asRoot
        ? ['--cap-drop', 'ALL', ...['CAP_SETUID', 'CAP_SETGID', 'CAP_SETPCAP', 'CAP_DAC_OVERRIDE', 'CAP_FOWNER', 'CAP_KILL'].flatMap((cap) => ['--cap-add', cap])]
        : ['--unshare-user', '--cap-drop', 'ALL']),
      ...this.systemArgs,
      '--ro-bind-try', files.passwd, '/etc/passwd',
      '--ro-bind-try', files.group, '/etc/group',
      '--ro-bind', files.gitconfig, '/etc/gitconfig',
      '--proc', '/proc',
      '--dev', '/dev',
      ...['/tmp', '/var/tmp', '/dev/shm'].flatMap((dir) => [...tmpSize, '--perms', '1777', '--tmpfs', dir]),
      // The workdir's parents are created searchable (bwrap's default for them is 0700).
      ...(path.dirname(workdir) === workdir ? [] : ['--perms', '0755', '--dir', path.dirname(workdir)]),
      '--bind', workdir, workdir,
      '--chdir', spec.cwd,
      '--',
      'bash', '-c', userMode ? `${waitForNetworkScript()}\n${entry}` : entry, 'agentd-sandbox',
      spec.command, ...spec.args,
    ];
    const env = identity ? { ...spec.env, USER: SANDBOX_USER, LOGNAME: SANDBOX_USER } : { ...spec.env };
    if (userMode) {
      const script = userModeWrapperScript({ helper: userMode, asRoot: this.asRoot });
      return { command: 'setpriv', args: ['--pdeathsig', 'KILL', '--', 'bash', '-c', script, 'agentd-net', this.options.bwrapPath, ...args], cwd: spec.cwd, env, programDepth: 3 };
    }
    return { command: 'env', args: ['--ignore-signal=INT', this.options.bwrapPath, ...args], cwd: spec.cwd, env, programDepth: 2 };
  }
}
