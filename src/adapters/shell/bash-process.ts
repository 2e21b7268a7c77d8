import { constants as osConstants } from 'node:os';
import { Readable, Writable } from 'node:stream';
import type { PreparedProcess, ProcessLauncher, SandboxRequest } from '../process/process-launcher.js';
import type { SpawnedProcess, SpawnProcess } from '../process/process-spawner.js';
import { spawnHere } from '../process/spawn-here.js';
import { sandboxCleanup } from '../process/spread-work.js';
import { childProcesses, descendantsByChildren, descendantsOf, listProcesses, pidNamespaceDepth, readProcess, signalQuietly } from '../process/process-tree.js';

const BASH_ARGS = ['--norc', '--noprofile', '--noediting', '-i'];
/** After bash exits, how long to wait for the rest of its output when something still holds stdout. */
const EXIT_FLUSH_MS = 200;

export interface BashProcessOptions {
  launcher: ProcessLauncher;
  /** Default: spawned by the server itself (see ProcessSpawner). */
  spawn?: SpawnProcess;
  bashPath: string;
  workdir: string;
  env: Record<string, string>;
  /** The conversation's sandbox options (network). */
  sandbox?: { network: boolean | 'host' };
  /** The sandbox's workdir set-up is left for a later `launcher.ready` (a shell started ahead of its first command). */
  setupLater?: boolean;
  onOutput: (text: string) => void;
  /** Called once, after the last output, with the exit code (128 + signal number when killed). */
  onExit: (exitCode: number) => void;
}

/** How long a command runs before the sandbox's watchdog is told of it (see setBusy). */
const WATCH_AFTER_MS = 20;

/**
 * The operating-system side of the shell: one interactive bash (no tty) spawned through the
 * launcher as the leader of its own process group (in a sandbox, the group leader is bwrap and
 * bash sits `programDepth` processes below it, in the same group). Its stdin carries our command
 * lines, fd 3 is the stdin of the running command, stdout carries the output.
 */
export class BashProcess {
  exited = false;
  /** The last lines bash printed on stderr before the init script merged it into stdout. */
  diagnostics = '';
  readonly finalized: Promise<void>;
  private readonly programDepth: number;
  private shell: { pid: number; pgid: number; chain: number[] } | undefined;
  private readonly controlFd: number | undefined;
  /** What the launcher has bash run first (PreparedProcess.shellPrelude), or ''. */
  readonly prelude: string;
  /** The watchdog is told of the running command once it has run WATCH_AFTER_MS (see setBusy). */
  private watchTimer: NodeJS.Timeout | undefined;
  private watching = false;

  /** Spawns bash (through the launcher). */
  static async start(options: BashProcessOptions): Promise<BashProcess> {
    const sandbox: SandboxRequest = { workdir: options.workdir, network: options.sandbox?.network ?? true };
    const spec = options.launcher.prepare({ command: options.bashPath, args: BASH_ARGS, cwd: options.workdir, env: options.env, sandbox, control: true, ...(options.setupLater && { setupLater: true }) });
    const stdio: Array<'pipe' | 'ignore'> = ['pipe', 'pipe', 'pipe', 'pipe'];
    if (spec.controlFd !== undefined) {
      while (stdio.length < spec.controlFd) stdio.push('ignore');
      stdio[spec.controlFd] = 'pipe';
    }
    // A sandbox ends at the end of its script (bash's stdin) or of its control pipe. Held by the
    // spawner too, the server's exit does not end it: the spawner does, once the server is gone,
    // so that a thousand sandboxes' teardowns do not share the machine with that exit (P13).
    const held = spec.programDepth > 0 ? [0, ...(spec.controlFd === undefined ? [] : [spec.controlFd])] : [];
    const child = await (options.spawn ?? spawnHere)({ command: spec.command, args: spec.args, cwd: spec.cwd, env: spec.env, detached: true, stdio, ...(spec.spare && { spare: spec.spare }), ...(held.length > 0 && { held }) });
    return new BashProcess(options, spec, child);
  }

  private constructor(
    options: BashProcessOptions,
    spec: PreparedProcess,
    private readonly child: SpawnedProcess,
  ) {
    this.programDepth = spec.programDepth;
    this.controlFd = spec.controlFd;
    this.prelude = spec.shellPrelude ?? '';
    for (const stream of this.child.stdio) stream?.on('error', () => undefined);
    const stdout = this.output(1);
    this.output(2)?.setEncoding('utf8').on('data', (text: string) => (this.diagnostics = (this.diagnostics + text).slice(-1000)));
    stdout?.setEncoding('utf8').on('data', options.onOutput);
    let markFinalized = (): void => undefined;
    this.finalized = new Promise((resolve) => (markFinalized = resolve));
    const onGone = (exitCode: number): void => {
      if (this.exited) return;
      this.exited = true;
      // End of file on the control channel (the sandbox's watchdog stops whatever is left) and the
      // cgroups released, a few exits per event-loop turn: a shutdown's thousand exits arrive at once.
      clearTimeout(this.watchTimer);
      sandboxCleanup.add(() => {
        this.control()?.destroy();
        spec.release?.();
      });
      let done = false;
      const finalize = (): void => {
        if (done) return;
        done = true;
        options.onExit(exitCode);
        markFinalized();
      };
      if (!stdout || stdout.readableEnded) return finalize();
      const timer = setTimeout(finalize, EXIT_FLUSH_MS);
      stdout.once('end', () => (clearTimeout(timer), finalize()));
    };
    this.child.once('exit', (code, signal) => onGone(code ?? 128 + (signal ? osConstants.signals[signal] : 0)));
    this.child.once('error', (error) => ((this.diagnostics += error.message), onGone(127)));
  }

  /** Spawned through a sandbox (bash sits below bwrap): see BashShellSession.killForExit. */
  get sandboxed(): boolean {
    return this.programDepth > 0;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** A line (or lines) for bash itself to read and run. */
  writeControl(text: string): void {
    if (!this.exited) this.input(0)?.write(text);
  }

  /**
   * Tells the sandbox's watchdog whether a command runs (it counts the sandbox's tasks twice a
   * second only then), once the command has run WATCH_AFTER_MS: most commands end sooner, and
   * each word woke the watchdog's shell twice per command, beside the command itself (a short
   * command in a sandboxed shell took visibly longer with them, more so on a loaded machine). The
   * watchdog's first count came at the command's start, when nothing had
   * forked yet; its next, half a second later, comes as before.
   */
  setBusy(busy: boolean): void {
    if (this.exited || this.controlFd === undefined) return;
    clearTimeout(this.watchTimer);
    if (busy) {
      const since = performance.now();
      const tell = (): void => {
        if (this.exited) return;
        // Timers count on the event loop's clock, whole milliseconds: one may fire up to a millisecond early.
        const left = WATCH_AFTER_MS - (performance.now() - since);
        if (left > 0) {
          this.watchTimer = setTimeout(tell, Math.ceil(left));
          this.watchTimer.unref();
          return;
        }
        this.watching = true;
        this.control()?.write('r');
      };
      this.watchTimer = setTimeout(tell, WATCH_AFTER_MS);
      this.watchTimer.unref();
      return;
    }
    if (!this.watching) return;
    this.watching = false;
    this.control()?.write('i');
  }

  /** Text for the running command's stdin. */
  writeInput(text: string): void {
    if (!this.exited) this.commandInput()?.write(text);
  }

  /** End of file on the running command's stdin (and every later command's: it cannot be reopened). */
  endInput(): void {
    this.commandInput()?.end();
  }

  /** A signal to bash's process group: bash itself and its foreground command. */
  signalGroup(signal: NodeJS.Signals): void {
    const shell = this.locateShell();
    if (!this.exited && shell) signalQuietly(-shell.pgid, signal);
  }

  /**
   * Whether processes other than bash live in the shell: its jobs (`cmd &`), and in a sandbox also
   * what the sandbox's init adopted (a job whose parent exited); the sandbox's watchdog, bash's
   * child since the start, does not count. Read through /proc's children files: the cost grows
   * with the shell's tree, not with the machine's process table.
   */
  hasJobs(): boolean {
    // In a sandbox: its init, bash and the watchdog; else bash.
    return this.processes().length > (this.sandboxed ? 3 : 1);
  }

  /** bash and every process below it; in a sandbox, every process of its pid namespace (what its init adopted too). */
  processes(): number[] {
    const shell = this.locateShell();
    if (!shell || this.exited) return [];
    const top = this.sandboxed ? (shell.chain[shell.chain.length - 2] as number) : shell.pid;
    return [top, ...descendantsByChildren(top)];
  }

  /** Escalation after SIGINT: SIGKILL what still runs in bash's process group, bash (and the sandbox around it) excepted. */
  killForeground(): void {
    const shell = this.locateShell();
    if (!shell || this.exited) return;
    const processes = listProcesses();
    const foreground = processes.filter((entry) => entry.pgid === shell.pgid && !shell.chain.includes(entry.pid));
    for (const { pid } of foreground) for (const target of [pid, ...descendantsOf(pid, processes)]) signalQuietly(target, 'SIGKILL');
  }

  /**
   * SIGKILL to bash, its process group and every process below it, even those in other groups.
   * In a sandbox only the spawned process is killed: bwrap (--die-with-parent) then kills every
   * process of the sandbox, and the network helper has a parent-death signal; no process table is
   * read, and the dying helper's teardown is not paid for here (killing it directly costs the
   * caller milliseconds). Once the spawned process has exited, killLeftovers signals its group.
   */
  killAll(): void {
    const spawnedPid = this.child.pid;
    if (spawnedPid === undefined || this.exited) return;
    if (this.programDepth > 0) return signalQuietly(spawnedPid, 'SIGKILL');
    const tree = descendantsByChildren(spawnedPid);
    signalQuietly(-spawnedPid, 'SIGKILL');
    for (const pid of tree) signalQuietly(pid, 'SIGKILL');
  }

  /** After bash exited: whatever stayed in its process group. */
  killLeftovers(): void {
    if (this.child.pid !== undefined) signalQuietly(-this.child.pid, 'SIGKILL');
  }

  /**
   * bash and its process group. On the host bash is the spawned group leader. In a sandbox it sits
   * `programDepth` levels below (bwrap, the pid namespace's init) and, being interactive, has
   * made itself the leader of a group of its own: that group holds its foreground commands.
   */
  private locateShell(): { pid: number; pgid: number; chain: number[] } | undefined {
    const spawned = this.child.pid;
    if (this.shell || spawned === undefined) return this.shell;
    if (this.programDepth === 0) return (this.shell = { pid: spawned, pgid: spawned, chain: [spawned] });
    const chain = programChain(spawned, this.programDepth);
    if (chain.length !== this.programDepth + 1) return undefined;
    const pid = chain[chain.length - 1] as number;
    return (this.shell = { pid, pgid: readProcess(pid)?.pgid ?? spawned, chain });
  }

  private control(): Writable | undefined {
    return this.controlFd === undefined ? undefined : this.input(this.controlFd);
  }

  private commandInput(): Writable | undefined {
    return this.input(3);
  }

  private input(fd: number): Writable | undefined {
    const stream = this.child.stdio[fd];
    return stream instanceof Writable ? stream : undefined;
  }

  private output(fd: number): Readable | undefined {
    const stream = this.child.stdio[fd];
    return stream instanceof Readable ? stream : undefined;
  }
}

/**
 * The spawned process and the processes down to the program: at each level the oldest child (a
 * sandbox's init may also adopt orphans, which are younger than the program), one in a pid
 * namespace below its parent's first: bwrap's monitor has the sandbox's init as a child, and with
 * a user-mode network the helper too, which it had before the init.
 */
function programChain(spawnedPid: number, depth: number): number[] {
  const chain = [spawnedPid];
  for (let level = 0; level < depth; level += 1) {
    const parent = chain[chain.length - 1] as number;
    const children = childProcesses(parent).sort((a, b) => a.startTime - b.startTime);
    const parentDepth = children.length > 1 ? pidNamespaceDepth(parent) : 0;
    const next = (children.length > 1 ? children.find((child) => pidNamespaceDepth(child.pid) > parentDepth) : undefined) ?? children[0];
    if (!next) break;
    chain.push(next.pid);
  }
  return chain;
}
