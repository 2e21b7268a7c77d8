import fs from 'node:fs';
import path from 'node:path';
import type { PreparedProcess, ProcessLauncher, ProcessSpec, SandboxRequest, SpareStart } from '../process/process-launcher.js';
import type { LimitEnforcement, ResourceLimits } from './resource-limits.js';
import type { SandboxCgroups } from './cgroups.js';
import { closeOtherFds, CONTROL_FD, sandboxEntryScript } from './entry-script.js';
import { SANDBOX_USER, sandboxUid } from './identity.js';
import { AgentIdentities, type AgentIdentity } from './agent-identity.js';
import { copiedFileRedirections, sandboxPrograms, shellWord, systemMountArgs, type SandboxPrograms } from './mounts.js';
import { setIdSeccompFilter } from './seccomp-filter.js';
import { BWRAP_INFO_FD, BWRAP_SYNC_FD, BWRAP_USERNS_BLOCK_FD, NETWORK_WAIT_FD, userModeLaunchScript, waitForNetworkScript, type NetworkHelper } from './network.js';

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
  /**
   * Where the workdirs agentd creates lie (AGENTD_WORKDIR_BASE): as root, only those get a uid of
   * their own; any other workdir is the user's and the agent runs there as its owner. Unset: every
   * workdir gets a uid of its own.
   */
  createdWorkdirBase?: string;
  /** Whole-sandbox memory and process limits, when the host lets the server create cgroups. */
  cgroups?: SandboxCgroups | null;
  /** The user-mode network stack for `network: true`; null: such sandboxes get no network. */
  networkHelper?: NetworkHelper | null;
  /** A workdir the user brought cannot be id-mapped (workdir-idmap.ts): the agent runs there as its owner. */
  onIdmapRefused?: (workdir: string, reason: string) => void;
}

/**
 * bash for the scripts that run before the agent's program holds no privilege: the launch script
 * (on the host, as the server's user: root, all capabilities, when the server is root) and the
 * entry script (the sandbox's root, with the capabilities it keeps to switch to the agent's uid).
 * Their HOME is the agent's (its workdir by default) and their stdin a socket (child_process's
 * pipes are socketpairs): a `bash -c` that finds its stdin a network connection takes itself for
 * a remote shell and runs ~/.bashrc, so the agent's own .bashrc ran as root on the host before
 * every sandbox's start. `--norc --noprofile`: no startup file; `-p`: no $BASH_ENV (or $ENV), no
 * function imported from the environment, SHELLOPTS and friends ignored. bash itself, like every
 * program these scripts run, by absolute path (sandboxPrograms).
 */
const privilegedBash = (bash: string) => [bash, '--norc', '--noprofile', '-p'];

/** The descriptor on which bwrap reads the seccomp program (opened by the launch script). */
const SECCOMP_FD = 10;

/**
 * Runs every agent process inside bubblewrap:
 * - its own mount namespace: system directories and an allowlist of /etc read-only (its files
 *   copied in at each start, its directories bound: sandbox/mounts.ts), the workdir
 *   read-write at its real path (nosuid, nodev: bwrap binds so), a private /tmp (/var/tmp points
 *   there) and /dev/shm, each a tmpfs of AGENTD_LIMIT_TMP_MB, its own /proc and a minimal /dev;
 *   the root and /dev are then made read-only; nothing else of the host exists inside;
 * - its own pid namespace (`--unshare-pid`): the sandbox's init dies with the program and takes
 *   every process of the sandbox with it; `--die-with-parent`: a server killed with -9 takes its
 *   sandboxes along (bwrap arms it only after its clone, and a bwrap killed before it let its
 *   child go on leaves that child waiting: the spawner kills whole process groups, spawner-main.ts);
 *   a network namespace unless the conversation has `network: 'host'`, with user-mode networking
 *   attached from outside for `network: true` (sandbox/network.ts);
 * - as root: all capabilities dropped but those the entry script needs to switch to the agent's
 *   own uid (sandbox/identity.ts) and to stop the sandbox; the agent itself holds none (effective,
 *   permitted, inheritable, ambient and bounding sets empty, no_new_privs). A workdir agentd made is
 *   given to the agent's uid (workdir-owner.ts) so it works on its files as their owner; one the
 *   user brought is mounted id-mapped instead, its owner shown as the agent's uid
 *   (workdir-idmap.ts). Not root: a user namespace with the server's uid, no capabilities;
 * - a seccomp filter (seccomp-filter.ts) refuses set-id bits on any file the agent creates or
 *   chmods, so nothing it leaves in the workdir can run with its owner's ids on the host;
 * - when the host allows it, the conversation's cgroups (sandbox/cgroups.ts): the spawned launch
 *   script joins them before it execs bwrap, so the whole sandbox shares one memory and one
 *   process limit.
 * No `--new-session`: bwrap, its init and the program stay in the spawned process group (an
 * interactive bash then makes itself the leader of a group of its own, which bash-process.ts
 * finds and signals). A SIGINT to the spawned group would kill bwrap's monitor and the sandbox
 * with it, so bwrap runs with SIGINT ignored (`trap '' INT` before its exec) and the entry script
 * restores it for the program. Inherited file descriptors (the shell's fd 3) pass through
 * bwrap unchanged.
 */
export class BwrapProcessLauncher implements ProcessLauncher {
  readonly mode = 'bwrap';
  readonly limits: ResourceLimits;
  private readonly systemArgs: { early: string[]; late: string[] };
  /** The system mounts of a light start (ProcessSpec.light): the programs and the loader's cache. */
  private readonly lightSystemArgs: { early: string[]; late: string[] };
  /** The launch script's lines that open the /etc files bwrap copies in (sandbox/mounts.ts). */
  private readonly copiedFiles: string[];
  /** The descriptors the launch opens for bwrap alone: the copied files' and the seccomp program's. */
  private readonly forBwrap: number[];
  /** The programs the sandbox's scripts run, by absolute path (never looked up from the workdir). */
  private readonly programs: SandboxPrograms;
  /** Who the agent runs as in each workdir (agent-identity.ts). */
  private readonly agents: AgentIdentities;
  readonly enforcement: LimitEnforcement;
  /** Why set-id bits are not filtered (no seccomp program for this host), else null. */
  readonly seccompUnavailable: string | null;
  private readonly asRoot: boolean;
  private readonly cgroups: SandboxCgroups | null;
  private readonly seccompFile: string | null;

  constructor(private readonly options: BwrapLauncherOptions) {
    this.limits = options.limits;
    this.asRoot = options.runningAsRoot ?? process.geteuid?.() === 0;
    this.cgroups = options.cgroups ?? null;
    void this.cgroups?.sweep();
    this.programs = sandboxPrograms(options.searchPath);
    // Made first: its identity files make the state dir, where the seccomp program goes next.
    this.agents = new AgentIdentities({
      stateDir: options.stateDir,
      programs: this.programs,
      ...(options.createdWorkdirBase !== undefined && { createdWorkdirBase: options.createdWorkdirBase }),
      ...(options.onIdmapRefused && { onIdmapRefused: options.onIdmapRefused }),
    });
    const filter = setIdSeccompFilter();
    this.seccompFile = filter && path.join(options.stateDir, 'seccomp-setid.bpf');
    if (this.seccompFile && filter) fs.writeFileSync(this.seccompFile, filter, { mode: 0o600 });
    this.seccompUnavailable = filter ? null : `no seccomp program for ${process.arch}`;
    const limited = (value: number | null, by: 'cgroup' | 'rlimit' | 'tmpfs' | 'server') => (value === null ? 'none' : by);
    this.enforcement = Object.freeze({
      cpuSeconds: limited(this.limits.cpuSeconds, 'rlimit'),
      memoryMb: limited(this.limits.memoryMb, this.cgroups?.enforces.memory ? 'cgroup' : 'rlimit'),
      processes: limited(this.limits.processes, this.cgroups?.enforces.pids ? 'cgroup' : 'rlimit'),
      fileMb: limited(this.limits.fileMb, 'rlimit'),
      tmpMb: limited(this.limits.tmpMb, 'tmpfs'),
      workdirMb: limited(this.limits.workdirMb, 'server'),
    });
    const { copies, ...systemArgs } = systemMountArgs({
      tools: options.tools ?? [process.execPath, 'git', 'rg', 'bash', 'env', 'setpriv', 'mkfifo'],
      searchPath: options.searchPath,
      extraReadOnly: options.extraReadOnlyPaths ?? [],
      hidden: options.hiddenPaths,
    });
    this.systemArgs = systemArgs;
    const light = systemMountArgs({ tools: ['git', 'bash', 'setpriv'], searchPath: options.searchPath, extraReadOnly: [], hidden: options.hiddenPaths, etc: ['/etc/ld.so.cache'] });
    this.lightSystemArgs = { early: light.early, late: light.late };
    this.copiedFiles = copiedFileRedirections(copies);
    this.forBwrap = [...(this.seccompFile ? [SECCOMP_FD] : []), ...copies.map((copy) => copy.fd)];
  }

  async ready(sandbox: SandboxRequest): Promise<void> {
    if (this.asRoot) await this.agents.ready(sandbox.workdir);
  }

  /** What a start needs made before it (prepare): the cgroups, and as root the agent's identity files, off the event loop. */
  async beforeStart(sandbox: SandboxRequest): Promise<void> {
    await Promise.all([this.cgroups?.makeDirectories(cgroupKey(sandbox.workdir)), this.asRoot ? this.agents.prepare(sandbox.workdir) : undefined]);
  }

  /** Who a workdir's sandboxed processes run as when the server is root; null: the server's own user. */
  runsAs(workdir: string): { uid: number; gid: number } | null {
    if (!this.asRoot) return null;
    const { uid, gid } = this.agents.identityFor(workdir);
    return { uid, gid };
  }

  forget(workdir: string): void {
    if (this.asRoot) this.agents.forget(workdir);
  }

  async removeCgroups(): Promise<void> {
    await this.cgroups?.removeMade();
  }

  removeCgroupsAfterExit(): void {
    this.cgroups?.removeMadeAfterExit(this.programs);
  }

  /** What is kept about workdirs: how many are known given away, how many identity files known written (tests). */
  get held(): { owned: number; identityFiles: number } {
    return { owned: this.agents.owned, identityFiles: this.agents.files.held };
  }

  prepare(spec: ProcessSpec): PreparedProcess {
    const workdir = spec.sandbox?.workdir ?? spec.cwd;
    const identity = this.asRoot ? this.agents.identityFor(workdir) : null;
    if (identity && !spec.setupLater) this.agents.giveNow(workdir, identity);
    // In its launch's own mount namespace, the workdir bwrap binds is the id-mapped one (workdir-idmap.ts).
    const idmap = this.agents.launch(workdir, identity);
    const files = identity?.files ?? this.agents.files.forServerUser();
    if (spec.light && !spec.control) return this.prepareLight(spec, workdir, identity, idmap);
    const network = spec.sandbox?.network ?? true;
    const userMode = network === true && this.options.networkHelper ? this.options.networkHelper : null;
    // A user-mode network comes up while the sandbox starts (the helper attaches from outside).
    // A one-off program waits for it before it starts; the shell starts meanwhile and waits for it
    // before its first line (shellPrelude): the wait overlaps its exec chain (env, setpriv, an
    // interactive bash), which takes about as long.
    const networkWait = userMode ? waitForNetworkScript() : null;
    // The shell keeps its command channel, the control pipe and (its prelude reads it) the network's wait.
    const keepFds = spec.control ? [0, 1, 2, 3, CONTROL_FD, ...(networkWait ? [NETWORK_WAIT_FD] : [])] : [0, 1, 2];
    const entry = sandboxEntryScript({ limits: this.limits, addressSpace: !this.cgroups?.enforces.memory, runAs: identity && { uid: identity.uid, gid: identity.gid }, control: spec.control ?? false, programs: this.programs, keepFds });
    const tmpSize = this.limits.tmpMb === null ? [] : ['--size', String(this.limits.tmpMb * 1024 * 1024)];
    const args = [
      '--die-with-parent',
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-cgroup-try',
      // See sandbox/network.ts: 'host' shares the host's network; anything else gets a namespace.
      ...(network === 'host' ? [] : ['--unshare-net']),
      // Not root: bwrap waits for the launch's helper side to map the server's ids in the sandbox's user namespace (userModeLaunchScript).
      ...(userMode ? ['--info-fd', String(BWRAP_INFO_FD), '--sync-fd', String(BWRAP_SYNC_FD), ...(this.asRoot ? [] : ['--userns-block-fd', String(BWRAP_USERNS_BLOCK_FD)])] : []),
      ...(this.asRoot
        ? ['--cap-drop', 'ALL', ...['CAP_SETUID', 'CAP_SETGID', 'CAP_SETPCAP', 'CAP_KILL', 'CAP_DAC_READ_SEARCH'].flatMap((cap) => ['--cap-add', cap])]
        : ['--unshare-user', '--cap-drop', 'ALL']),
      ...this.systemArgs.early,
      '--ro-bind-try', files.passwd, '/etc/passwd',
      '--ro-bind-try', files.group, '/etc/group',
      '--ro-bind', files.gitconfig, '/etc/gitconfig',
      '--proc', '/proc',
      '--dev', '/dev',
      ...['/tmp', '/dev/shm'].flatMap((dir) => [...tmpSize, '--perms', '1777', '--tmpfs', dir]),
      '--perms', '0755', '--dir', '/var',
      '--symlink', '/tmp', '/var/tmp',
      // Read-only paths inside /tmp or /dev/shm (a checkout under /tmp): bound over the private tmpfs.
      ...this.systemArgs.late,
      // The workdir's parents are created searchable (bwrap's default for them is 0700).
      ...(path.dirname(workdir) === workdir ? [] : ['--perms', '0755', '--dir', path.dirname(workdir)]),
      '--bind', workdir, workdir,
      ...(spec.binds ?? []).flatMap((bind) => ['--bind', bind.source, bind.target]),
      // Nothing but the workdir, /tmp and /dev/shm is writable: the root and /dev are tmpfs
      // mounts that count against no limit.
      '--remount-ro', '/dev',
      '--remount-ro', '/',
      ...(this.seccompFile ? ['--seccomp', String(SECCOMP_FD)] : []),
      '--chdir', spec.cwd,
      '--',
      ...privilegedBash(this.programs.bash), '-c', networkWait && !spec.control ? `${networkWait}\n${entry}` : entry, 'agentd-sandbox',
      spec.command, ...spec.args,
    ];
    const env = identity?.named ? { ...spec.env, USER: SANDBOX_USER, LOGNAME: SANDBOX_USER } : { ...spec.env };
    const key = cgroupKey(workdir);
    // The launch script: it mounts an id-mapped workdir (in its own mount namespace), joins the
    // cgroups, opens what bwrap reads (the copied /etc files, the seccomp program), then execs
    // bwrap; with a user-mode network it forks the side that attaches the helper first (one bash
    // for both: a second bash, exec'd after the first, was one more program start in every
    // sandbox's start).
    const launch = [
      ...idmap.line,
      ...(this.cgroups ? [this.cgroups.joinScript(key, this.programs.mkdir)] : []),
      ...this.copiedFiles,
      ...(this.seccompFile ? [`exec ${SECCOMP_FD}<${shellWord(this.seccompFile)}`] : []),
      // bwrap with SIGINT ignored: an ignored signal stays ignored across exec (`env --ignore-signal=INT` was one more exec in every start).
      userMode ? userModeLaunchScript({ helper: userMode, asRoot: this.asRoot, forBwrap: this.forBwrap, programs: this.programs }) : `trap '' INT\nexec "$@"`,
    ].join('\n');
    const release = this.cgroups ? () => this.cgroups?.release(key) : undefined;
    const launchBash = [...idmap.prefix, ...privilegedBash(this.programs.bash)];
    const name = userMode ? 'agentd-net' : 'agentd-launch';
    const [command, ...launchArgs] = [...launchBash, '-c', launch, name, this.options.bwrapPath, ...args];
    // Not from a spare when id-mapped: a namespace made ahead would miss what the host mounted since.
    const spare = identity?.idmapped ? null : spareStart({ launchBash, name, cwd: spec.cwd, env, argv: [this.options.bwrapPath, ...args], launch });
    return { command: command!, args: launchArgs, cwd: spec.cwd, env, programDepth: 2, ...(release && { release }), ...(spec.control && { controlFd: CONTROL_FD, ...(networkWait && { shellPrelude: networkWait }) }), ...(spare && { spare }) };
  }

  /**
   * A light start (ProcessSpec.light): bwrap runs the program itself (through setpriv as root),
   * with no entry script: none of the agent's sandbox's /etc copies and binds, watchdog fork, or
   * env and setpriv through bash, which were most of a small checkpoint's time (bench P19).
   */
  private prepareLight(spec: ProcessSpec, workdir: string, identity: AgentIdentity | null, idmap: { prefix: string[]; line: string[] }): PreparedProcess {
    const files = identity?.files ?? this.agents.files.forServerUser();
    const tmpSize = this.limits.tmpMb === null ? [] : ['--size', String(this.limits.tmpMb * 1024 * 1024)];
    const runAs = identity
      ? [this.programs.setpriv, `--reuid=${identity.uid}`, `--regid=${identity.gid}`, '--clear-groups', '--inh-caps=-all', '--ambient-caps=-all', '--bounding-set=-all', '--no-new-privs', '--']
      : [];
    const args = [
      '--die-with-parent',
      '--unshare-pid',
      '--unshare-ipc',
      '--unshare-cgroup-try',
      '--unshare-net',
      ...(this.asRoot ? ['--cap-drop', 'ALL', ...['CAP_SETUID', 'CAP_SETGID', 'CAP_SETPCAP'].flatMap((cap) => ['--cap-add', cap])] : ['--unshare-user', '--cap-drop', 'ALL']),
      ...this.lightSystemArgs.early,
      '--ro-bind', files.gitconfig, '/etc/gitconfig',
      '--proc', '/proc',
      '--dev', '/dev',
      ...tmpSize, '--perms', '1777', '--tmpfs', '/tmp',
      ...this.lightSystemArgs.late,
      ...(path.dirname(workdir) === workdir ? [] : ['--perms', '0755', '--dir', path.dirname(workdir)]),
      '--bind', workdir, workdir,
      ...(spec.binds ?? []).flatMap((bind) => ['--bind', bind.source, bind.target]),
      '--remount-ro', '/dev',
      '--remount-ro', '/',
      ...(this.seccompFile ? ['--seccomp', String(SECCOMP_FD)] : []),
      '--chdir', spec.cwd,
      '--',
      ...runAs,
      spec.command, ...spec.args,
    ];
    const key = cgroupKey(workdir);
    const launch = [
      ...idmap.line,
      ...(this.cgroups ? [this.cgroups.joinScript(key, this.programs.mkdir)] : []),
      ...(this.seccompFile ? [`exec ${SECCOMP_FD}<${shellWord(this.seccompFile)}`] : []),
      // No entry script closes what the server inherited (sandbox/entry-script.ts, step 0): this does, before bwrap.
      closeOtherFds([0, 1, 2, ...(this.seccompFile ? [SECCOMP_FD] : [])]),
      `trap '' INT\nexec "$@"`,
    ].join('\n');
    const release = this.cgroups ? () => this.cgroups?.release(key) : undefined;
    const launchBash = [...idmap.prefix, ...privilegedBash(this.programs.bash)];
    const [command, ...launchArgs] = [...launchBash, '-c', launch, 'agentd-launch', this.options.bwrapPath, ...args];
    const env = { ...spec.env };
    const spare = identity?.idmapped ? null : spareStart({ launchBash, name: 'agentd-launch', cwd: spec.cwd, env, argv: [this.options.bwrapPath, ...args], launch });
    return { command: command!, args: launchArgs, cwd: spec.cwd, env, programDepth: 2, ...(release && { release }), ...(spare && { spare }) };
  }
}

/** The name of a workdir's cgroups (one per hierarchy): every sandbox of the workdir shares them. */
const cgroupKey = (workdir: string): string => `c${sandboxUid(workdir)}`;

/** The descriptor on which a spare launch reads its script (the shell's stdio and control channel are 0-4). */
const SPARE_SCRIPT_FD = 5;

/**
 * Names a launch bash cannot be given with `export` as it is given the rest of its environment
 * at exec: variables that change how bash itself runs (bash -p ignores some of them in its
 * environment), or that it sets or keeps read-only. A start whose environment has one is not
 * made from a spare.
 */
const NOT_EXPORTED = /^(?:BASH\w*|SHELLOPTS|IFS|CDPATH|GLOBIGNORE|ENV|PS4|POSIXLY_CORRECT|EXECIGNORE|FUNCNEST|SHLVL|PWD|OLDPWD|UID|EUID|PPID|GROUPS|OPTIND|OPTARG|OPTERR|LINENO|RANDOM|SRANDOM|SECONDS|EPOCHREALTIME|EPOCHSECONDS|HOSTNAME|HOSTTYPE|MACHTYPE|OSTYPE|_)$/;
const EXPORTABLE = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The launch as a spare process can run it (process-launcher.ts: SpareStart): the same bash (and
 * the id-mapped mount's prefix), started with no environment in `/`, reads a script (its length, a
 * newline, the script) and evaluates it: it closes the script's descriptor, moves to the launch's
 * directory, exports the launch's environment, sets its arguments (bwrap's command line) and goes
 * on with the launch script itself. End of file before the script (the spawner gone): it exits. The
 * environment and the command line never appear in the spare's own (nor does the script: it comes
 * on a pipe).
 */
function spareStart(options: { launchBash: string[]; name: string; cwd: string; env: Record<string, string>; argv: string[]; launch: string }): SpareStart | null {
  const names = Object.keys(options.env);
  if (names.some((name) => !EXPORTABLE.test(name) || NOT_EXPORTED.test(name))) return null;
  // The pipe is a socket (child_process's pipes are socketpairs): /dev/fd/5 cannot be opened, and
  // `read` without a count reads it a byte at a time (a system call per byte). So its length comes
  // first, then `read -N` takes that many (bytes: the spare's locale is C) in a few reads.
  const fd = SPARE_SCRIPT_FD;
  const [command, ...args] = [...options.launchBash, '-c', `IFS= read -r -u ${fd} agentd_n && IFS= read -r -N "$agentd_n" -u ${fd} agentd_s && eval "$agentd_s"`, options.name];
  const body = [
    `exec ${fd}<&-; unset agentd_n agentd_s`,
    // bash made OLDPWD (unset, exported) at its start, and sets it with the cd: a launch spawned in its directory has none.
    `cd -- ${shellWord(options.cwd)} || exit 125`,
    'unset OLDPWD',
    ...(names.length > 0 ? [`export ${names.map((name) => `${name}=${shellWord(options.env[name] as string)}`).join(' ')}`] : []),
    `set -- ${options.argv.map(shellWord).join(' ')}`,
    options.launch,
  ].join('\n');
  return { command: command!, args, scriptFd: fd, script: `${Buffer.byteLength(body)}\n${body}` };
}
