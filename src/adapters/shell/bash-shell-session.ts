import { randomBytes } from 'node:crypto';
import type { ShellRunOptions, ShellRunResult, ShellSession, ShellState } from '../../core/tools/shell-session.js';
import { EXPORTS_COMMAND, shellStateFrom } from './shell-state.js';
import { BashProcess } from './bash-process.js';
import type { ProcessLauncher, SandboxRequest } from '../process/process-launcher.js';
import type { SpawnProcess } from '../process/process-spawner.js';
import { killRecordedGroup, readProcess } from '../process/process-tree.js';
import { INIT_SCRIPT, SentinelScanner, bashQuote, commandLines } from './bash-protocol.js';
import { OutputWindow, joinOutput, markedText } from './output-window.js';
import type { WorkdirGuard } from './workdir-guard.js';
import type { StartSlots } from './start-slots.js';
import { INTERRUPT_GRACE_MS, commandResult, idleResult, stopCommand, waitForCommand, type Completion, type RunningCommand } from './bash-command.js';
import { ShellJobsWatch } from './jobs-watch.js';

const VALID_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface SessionConfig {
  workdir: string;
  env: Record<string, string>;
  launcher: ProcessLauncher;
  /** Default: spawned by the server itself. */
  spawn?: SpawnProcess;
  /** How much of an output the shell holds (its start and end): what the tool executor caps for the model and saves. */
  heldOutputChars: number;
  bashPath: string;
  startTimeoutMs: number;
  sandbox?: { network: boolean | 'host' };
  /** The workdir's disk limit, watched while a command runs. */
  guard?: WorkdirGuard;
  onSpawn?: (pid: number) => void;
  /** Started ahead of its first command: the sandbox's workdir set-up waits for that command (see ShellCreateOptions.ahead). */
  ahead?: boolean;
  /** The factory's open shells: this one is in it from its start until it is closed (see killForExit). */
  openShells?: Set<BashShellSession>;
  /** The factory's start-up slots: a start waits for one, and its time limit counts from there. */
  startSlots?: StartSlots;
}

/**
 * One long-lived bash per conversation (see bash-process.ts for the process, bash-protocol.ts for
 * the command lines and sentinels). At most one command runs at a time; a command past its time
 * limits keeps running and later calls poll it, feed it input or interrupt it. Interactive bash
 * makes SIGINT abort the whole command line (loops included) while the shell survives.
 */
export class BashShellSession implements ShellSession {
  private proc: BashProcess | undefined;
  private running: RunningCommand | undefined;
  /** A command that finished while nobody was waiting for it: the next poll reports it. */
  private unreported: RunningCommand | undefined;
  private listener: (() => void) | undefined;
  private scanner = new SentinelScanner();
  private staleNonces: string[] = [];
  private envQueue: string[] = [];
  private inputClosed = false;
  private everStarted = false;
  /** The running bash answered its first sentinel (see killForExit). */
  private answered = false;
  private cwd: string;
  private queue: Promise<unknown> = Promise.resolve();
  /** Set when this shell replaced one stopped while idle: told with the first result. */
  private resumed: { cwd: string; idleSeconds: number } | undefined;
  private readonly env: Record<string, string>;
  private readonly idleOutput: OutputWindow;
  /** Process groups of `cmd &` jobs, by pgid, with the leader's start time (see killRecordedGroup). */
  private readonly backgroundGroups = new Map<number, number>();
  /** Started ahead: the sandbox's workdir set-up is done before the first command (see SessionConfig.ahead). */
  private setupPending: boolean;
  /** The workdir's limit between commands, while jobs run (see complete). */
  private readonly jobsWatch: ShellJobsWatch | undefined;

  constructor(private readonly config: SessionConfig) {
    this.setupPending = config.ahead ?? false;
    this.jobsWatch = config.guard && new ShellJobsWatch(config.guard);
    this.cwd = config.workdir;
    this.env = { ...config.env };
    this.idleOutput = new OutputWindow(config.heldOutputChars);
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  get alive(): boolean {
    return this.proc !== undefined && !this.proc.exited;
  }

  run(command: string, options: ShellRunOptions & { isInput?: boolean }): Promise<ShellRunResult> {
    const result = this.queue.then(async () => {
      const outcome = await this.runNow(command, options);
      if (this.resumed) outcome.resumed = this.resumed;
      this.resumed = undefined;
      return outcome;
    });
    this.queue = result.catch(() => undefined);
    return result;
  }

  async setEnv(vars: Record<string, string>, unset: string[] = []): Promise<void> {
    const bad = [...Object.keys(vars), ...unset].find((name) => !VALID_NAME.test(name));
    if (bad !== undefined) throw new Error(`invalid environment variable name: ${JSON.stringify(bad)}`);
    for (const [name, value] of Object.entries(vars)) {
      this.env[name] = value;
      this.envQueue.push(`export ${name}=${bashQuote(value)}`);
    }
    for (const name of unset) {
      delete this.env[name];
      this.envQueue.push(`unset -v ${name}`);
    }
  }

  async interrupt(): Promise<void> {
    const running = this.running;
    if (!running || !this.proc) return;
    this.proc.signalGroup('SIGINT');
    // If SIGINT hit bash while it was reading the sentinel line, that line is lost: send it again
    // (a duplicate is recognised by its nonce and dropped).
    clearTimeout(running.interruptTimer);
    running.interruptTimer = setTimeout(() => {
      if (this.running === running) this.writeControl(`__agentd_done ${running.nonce}\n`);
    }, INTERRUPT_GRACE_MS);
  }

  async close(): Promise<void> {
    this.running?.stopGuard?.();
    this.jobsWatch?.end();
    const proc = this.proc;
    this.killProcesses();
    this.config.openShells?.delete(this);
    if (!proc) return;
    // At most 2 s for its exit; the timer goes once it exited (left running, it kept a process that
    // was otherwise done, such as a one-shot \`agentd run\`, alive for those 2 s).
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([proc.finalized, new Promise((resolve) => (timer = setTimeout(resolve, 2000)))]);
    clearTimeout(timer);
  }

  /**
   * The server exits next: SIGKILL to bash's processes and to its background jobs' groups, as
   * close() sends, but nothing is waited for: the exits are left to the kernel. A sandbox whose
   * shell answered is not signalled: the server's spawner ends it once the server's process is
   * gone (it holds the sandbox's script and control pipes too: BashProcess.start; bwrap armed
   * --die-with-parent before it started the shell), so its teardown runs after the server's exit
   * instead of preempting the server at each kill (P13: wall time for every sandbox on a loaded
   * machine) or sharing the machine with the exit. One still starting may not have armed
   * it yet: it is killed.
   */
  killForExit(): void {
    if (this.answered && this.proc?.sandboxed) return;
    this.killProcesses();
  }

  /** SIGKILL to bash's processes (the sandbox) and to its background jobs' groups; nothing waited for. */
  private killProcesses(): void {
    this.proc?.killAll();
    for (const [pgid, startTime] of this.backgroundGroups) killRecordedGroup({ pgid, startTime });
    this.backgroundGroups.clear();
  }

  /**
   * Records the directory and the exported variables (one `export -p`, at most 5 s), then closes.
   * Nothing happens while a command runs (null); a shell already gone just closes.
   */
  async suspend(): Promise<ShellState | null> {
    if (this.running) return null;
    let state: ShellState | null = null;
    // A shell started ahead that never ran a command has nothing to record (and its workdir stays as it is).
    if (this.alive && !this.setupPending) {
      const result = await this.run(EXPORTS_COMMAND, { timeoutMs: 5000, idleTimeoutMs: 5000 });
      if (result.exitCode === 0) state = shellStateFrom({ cwd: result.cwd, exports: result.output, serverEnv: this.env });
    }
    if (this.running) return null;
    await this.close();
    return state ?? { cwd: this.cwd, env: {}, unset: [] };
  }

  /** Applies a suspended shell's state before the next command (one line, no round trip). */
  restore(state: ShellState, idleSeconds: number): void {
    this.envQueue.push(`cd -- ${bashQuote(state.cwd)}`);
    void this.setEnv(state.env, state.unset.filter((name) => VALID_NAME.test(name)));
    this.resumed = { cwd: state.cwd, idleSeconds };
  }

  /** Starts (or restarts) bash in the workdir and waits for its first sentinel (in a start-up slot, when the factory has them). */
  start(): Promise<void> {
    return this.config.startSlots ? this.config.startSlots.run(() => this.startNow()) : this.startNow();
  }

  private async startNow(): Promise<void> {
    // The sandbox's slow set-up (the workdir given to the agent's uid) without blocking the event
    // loop; for a shell started ahead, before its first command instead (see runNow). Meanwhile,
    // what the launch would otherwise do on the start's path (beforeStart).
    await Promise.all([this.setupPending ? undefined : this.sandboxSetUp(), this.config.launcher.beforeStart?.(this.sandboxRequest())]);
    const proc: BashProcess = await BashProcess.start({
      ...this.config,
      setupLater: this.setupPending,
      env: { ...this.env },
      onOutput: (text) => this.proc === proc && this.onOutput(text),
      onExit: (exitCode) => this.proc === proc && this.onExit(proc, exitCode),
    });
    this.proc = proc;
    this.answered = false;
    this.config.openShells?.add(this);
    if (proc.pid !== undefined) this.config.onSpawn?.(proc.pid);
    this.everStarted = true;
    this.inputClosed = false;
    this.scanner = new SentinelScanner();
    this.envQueue = [];
    this.cwd = this.config.workdir;
    const nonce = randomBytes(8).toString('hex');
    this.running = { nonce, window: new OutputWindow(this.config.heldOutputChars), collecting: true, startedAt: Date.now(), interrupts: 0 };
    proc.setBusy(true);
    this.writeControl(`${proc.prelude && `${proc.prelude}\n`}${INIT_SCRIPT}\n__agentd_done ${nonce}\n`);
    const timeoutMs = this.config.startTimeoutMs;
    const ready = await this.collect({ timeoutMs, idleTimeoutMs: timeoutMs }, false);
    this.answered = ready.exitCode === 0 && this.alive;
    if (ready.exitCode !== 0 || !this.alive) {
      await this.close();
      throw new Error(`could not start bash in ${this.config.workdir}: ${proc.diagnostics.trim() || 'no answer'}`);
    }
  }

  private sandboxSetUp(): Promise<void> {
    return this.config.launcher.ready?.(this.sandboxRequest()) ?? Promise.resolve();
  }

  private sandboxRequest(): SandboxRequest {
    return { workdir: this.config.workdir, network: this.config.sandbox?.network ?? true };
  }

  private async runNow(command: string, options: ShellRunOptions & { isInput?: boolean }): Promise<ShellRunResult> {
    const isInput = options.isInput ?? false;
    if (this.setupPending) {
      // Files put into the workdir since the shell started ahead are the agent's before its first command.
      await this.sandboxSetUp();
      this.setupPending = false;
    }
    if (this.proc?.exited) await this.proc.finalized;
    if (options.signal?.aborted) return this.idleResult({ note: '[Aborted: nothing was run.]', restarted: false });
    const restarted = !this.alive && this.everStarted;
    if (!this.alive) await this.start();
    const running = this.running;
    if (!running && !isInput && command.trim() !== '') {
      this.startCommand(command.replaceAll('\r\n', '\n'));
      return this.collect(options, restarted);
    }
    if (!running) {
      const note = command === '' ? '' : '[No command is running, so the input was not sent.]';
      const unreported = this.unreported;
      this.unreported = undefined;
      if (!unreported) return this.idleResult({ note: note || '[No command is running.]', restarted });
      const result = this.result(unreported, { restarted });
      return { ...result, output: joinOutput(result.output + markedText(this.idleOutput.take()), note) };
    }
    const note = isInput
      ? this.sendInput(command)
      : '[A previous command is still running, so this one was not started. Call again with is_input: true and an empty command to wait for more output, text to send it input, or "C-c" to interrupt it.]';
    if (note === undefined) return this.collect(options, restarted);
    const result = this.result(running, { restarted });
    return { ...result, output: joinOutput(result.output, note), timedOut: false, ...(!isInput && { busy: true }) };
  }

  private sendInput(text: string): string | undefined {
    // "C-c", also written "^C", "ctrl-c" or "Ctrl+C".
    const key = text.trim().replace(/^(?:\^|ctrl[-+]|c-)([a-z])$/i, (_, letter: string) => `C-${letter.toLowerCase()}`);
    if (key === 'C-c') {
      const running = this.running;
      if (running && running.interrupts > 1) {
        // Still running after SIGINT and SIGKILL to its processes: bash itself is looping with
        // SIGINT ignored (`trap '' INT`). Only ending the shell stops it; the next command starts a fresh one.
        this.proc?.killAll();
        running.interrupted = 'killed';
      } else if (running && running.interrupts > 0) {
        // The first C-c did not end it (SIGINT ignored or trapped): kill what runs in the foreground.
        this.proc?.killForeground();
        running.interrupted = 'killed';
      } else if (running) running.interrupted = 'interrupt';
      if (running) running.interrupts += 1;
      void this.interrupt();
    } else if (key === 'C-d') {
      this.proc?.endInput();
      this.inputClosed = true;
    } else if (key === 'C-z') {
      return '[C-z is not supported (no job control). Use C-c, or start long-running programs with a trailing &.]';
    } else if (text !== '' && this.inputClosed) {
      return '[Input was closed by an earlier C-d, so the text was not sent. Use C-c to stop the command.]';
    } else if (text !== '') {
      this.proc?.writeInput(text.endsWith('\n') ? text : `${text}\n`);
    }
    return undefined;
  }

  private startCommand(command: string): void {
    const nonce = randomBytes(8).toString('hex');
    const window = new OutputWindow(this.config.heldOutputChars);
    const unreported = this.unreported;
    this.unreported = undefined;
    if (unreported) {
      const note = `[The previous command finished with exit code ${unreported.completion?.exitCode}.]`;
      this.idleOutput.append(joinOutput(markedText(unreported.window.take()), note));
    }
    const earlier = markedText(this.idleOutput.take());
    if (earlier !== '') window.append(`[Output since the last command (previous command, background processes):]\n${earlier}\n[End of that output.]\n`);
    const running: RunningCommand = { nonce, window, collecting: false, startedAt: Date.now(), interrupts: 0 };
    this.running = running;
    // The command's own watch covers the jobs while it runs.
    this.jobsWatch?.end();
    const onExceeded = (message: string): void => {
      if (this.running !== running) return;
      running.window.append(`\n${message}\n`);
      stopCommand(() => this.running === running, { interrupt: () => void this.interrupt(), killForeground: () => this.proc?.killForeground(), killShell: () => this.proc?.killAll() });
    };
    running.stopGuard = this.config.guard?.watch(onExceeded, { processes: () => this.proc?.processes() ?? [] });
    this.proc?.setBusy(true);
    const prefix = this.envQueue.splice(0).map((statement) => `${statement}; `).join('');
    this.writeControl(commandLines({ nonce, command, prefix }));
  }

  private collect(options: ShellRunOptions, restarted: boolean): Promise<ShellRunResult> {
    const running = this.running;
    if (!running) return Promise.resolve(this.idleResult({ note: '', restarted }));
    const hooks = {
      setListener: (listener: (() => void) | undefined) => (this.listener = listener),
      interrupt: () => void this.interrupt(),
      killForeground: () => this.proc?.killForeground(),
    };
    return waitForCommand(running, options, hooks, () => this.result(running, { restarted }));
  }

  private result(running: RunningCommand, extras: { restarted: boolean }): ShellRunResult {
    return commandResult(running, { cwd: this.cwd, restarted: extras.restarted });
  }

  private idleResult(options: { note: string; restarted: boolean }): ShellRunResult {
    return idleResult(this.idleOutput, { cwd: this.cwd, ...options });
  }

  private onOutput(text: string): void {
    const nonces = this.running ? [this.running.nonce, ...this.staleNonces] : this.staleNonces;
    for (const event of this.scanner.push(text, nonces)) {
      if (event.kind === 'text') this.emit(event.text);
      else if (event.nonce === this.running?.nonce) {
        const [code = '', pid = '', logFile = '', ...cwd] = event.fields;
        const completion: Completion = { exitCode: Number(code), cwd: cwd.join('\x1f') };
        if (pid !== '') Object.assign(completion, { pid: Number(pid), logFile });
        this.complete(completion);
      }
    }
    this.listener?.();
  }

  private emit(text: string): void {
    if (text !== '') (this.running?.window ?? this.idleOutput).append(text);
  }

  private complete(completion: Completion): void {
    const running = this.running;
    if (!running) return;
    clearTimeout(running.interruptTimer);
    running.stopGuard?.();
    running.completion = completion;
    running.endedAt = Date.now();
    this.running = undefined;
    this.proc?.setBusy(false);
    this.cwd = completion.cwd;
    this.staleNonces = [running.nonce, ...this.staleNonces].slice(0, 8);
    this.recordBackgroundJob(completion.pid);
    // Jobs left running: past the limit the shell is ended with all of them (in a sandbox bwrap
    // takes its whole pid namespace), whatever signals they ignore; the next command reads why.
    const proc = this.proc;
    if (proc)
      this.jobsWatch?.start(
        proc,
        () => this.proc === proc && !this.running,
        (message) => {
          this.idleOutput.append(message);
          this.killProcesses();
        },
      );
    if (!running.collecting) this.unreported = running;
  }

  private onExit(proc: BashProcess, exitCode: number): void {
    this.jobsWatch?.end();
    this.emit(this.scanner.flush());
    proc.killLeftovers();
    if (this.running) this.complete({ exitCode, cwd: this.cwd });
    this.listener?.();
  }

  /** Only a host pid that is really bash's child is recorded (in a pid namespace, $! is not one). */
  private recordBackgroundJob(pid: number | undefined): void {
    const job = pid === undefined ? undefined : readProcess(pid);
    if (job && job.ppid === this.proc?.pid && job.pgid === job.pid) this.backgroundGroups.set(job.pgid, job.startTime);
  }

  private writeControl(text: string): void {
    this.proc?.writeControl(text);
  }
}
