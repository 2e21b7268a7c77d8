import { spawn, type ChildProcess } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import { Writable } from 'node:stream';
import type { ProcessLauncher } from './process-launcher.js';
import { descendantsOf, listProcesses, signalQuietly } from './process-tree.js';

const BASH_ARGS = ['--norc', '--noprofile', '--noediting', '-i'];
/** After bash exits, how long to wait for the rest of its output when something still holds stdout. */
const EXIT_FLUSH_MS = 200;

export interface BashProcessOptions {
  launcher: ProcessLauncher;
  bashPath: string;
  workdir: string;
  env: Record<string, string>;
  onOutput: (text: string) => void;
  /** Called once, after the last output, with the exit code (128 + signal number when killed). */
  onExit: (exitCode: number) => void;
}

/**
 * The operating-system side of the shell: one interactive bash (no tty) spawned through the
 * launcher as the leader of its own process group. Its stdin carries our command lines, fd 3 is the
 * stdin of the running command, stdout carries the output.
 */
export class BashProcess {
  exited = false;
  /** The last lines bash printed on stderr before the init script merged it into stdout. */
  diagnostics = '';
  readonly finalized: Promise<void>;
  private readonly child: ChildProcess;

  constructor(options: BashProcessOptions) {
    const spec = options.launcher.prepare({ command: options.bashPath, args: BASH_ARGS, cwd: options.workdir, env: options.env });
    this.child = spawn(spec.command, spec.args, { cwd: spec.cwd, env: spec.env, detached: true, stdio: ['pipe', 'pipe', 'pipe', 'pipe'] });
    for (const stream of this.child.stdio) stream?.on('error', () => undefined);
    this.child.stderr?.setEncoding('utf8').on('data', (text: string) => (this.diagnostics = (this.diagnostics + text).slice(-1000)));
    this.child.stdout?.setEncoding('utf8').on('data', options.onOutput);
    let markFinalized = (): void => undefined;
    this.finalized = new Promise((resolve) => (markFinalized = resolve));
    const onGone = (exitCode: number): void => {
      if (this.exited) return;
      this.exited = true;
      let done = false;
      const finalize = (): void => {
        if (done) return;
        done = true;
        options.onExit(exitCode);
        markFinalized();
      };
      if (this.child.stdout?.readableEnded) return finalize();
      const timer = setTimeout(finalize, EXIT_FLUSH_MS);
      this.child.stdout?.once('end', () => (clearTimeout(timer), finalize()));
    };
    this.child.once('exit', (code, signal) => onGone(code ?? 128 + (signal ? osConstants.signals[signal] : 0)));
    this.child.once('error', (error) => ((this.diagnostics += error.message), onGone(127)));
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** A line (or lines) for bash itself to read and run. */
  writeControl(text: string): void {
    if (!this.exited) this.child.stdin?.write(text);
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
    if (!this.exited && this.child.pid !== undefined) signalQuietly(-this.child.pid, signal);
  }

  /** Escalation after SIGINT: SIGKILL what still runs in bash's process group, bash excepted. */
  killForeground(): void {
    const bashPid = this.child.pid;
    if (bashPid === undefined || this.exited) return;
    const processes = listProcesses();
    const foreground = processes.filter((entry) => entry.pgid === bashPid && entry.pid !== bashPid);
    for (const { pid } of foreground) for (const target of [pid, ...descendantsOf(pid, processes)]) signalQuietly(target, 'SIGKILL');
  }

  /** SIGKILL to bash, its process group and every process below it, even those in other groups. */
  killAll(): void {
    const bashPid = this.child.pid;
    if (bashPid === undefined || this.exited) return;
    const tree = descendantsOf(bashPid, listProcesses());
    signalQuietly(-bashPid, 'SIGKILL');
    for (const pid of tree) signalQuietly(pid, 'SIGKILL');
  }

  /** After bash exited: whatever stayed in its process group. */
  killLeftovers(): void {
    if (this.child.pid !== undefined) signalQuietly(-this.child.pid, 'SIGKILL');
  }

  private commandInput(): Writable | undefined {
    const stream = this.child.stdio[3];
    return stream instanceof Writable ? stream : undefined;
  }
}
