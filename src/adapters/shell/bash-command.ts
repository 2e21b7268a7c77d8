import type { ShellRunOptions, ShellRunResult } from '../../core/tools/shell-session.js';
import { OutputWindow, joinOutput } from './output-window.js';

/** After a C-c, how long a command has to end before what runs in the foreground is killed. */
export const INTERRUPT_GRACE_MS = 1000;

/** How a command ended: its sentinel's fields (a `cmd &` job's pid and log file too). */
export interface Completion {
  exitCode: number | null;
  cwd: string;
  pid?: number;
  logFile?: string;
}

/** The command in the shell now (or the shell's own start), from its line to its sentinel. */
export interface RunningCommand {
  nonce: string;
  window: OutputWindow;
  collecting: boolean;
  startedAt: number;
  endedAt?: number;
  /** C-c sent to this command so far (a second one kills its processes). */
  interrupts: number;
  /** What the last C-c did, reported with the next result. */
  interrupted?: 'interrupt' | 'killed';
  completion?: Completion;
  interruptTimer?: NodeJS.Timeout;
  stopGuard?: () => void;
}

/** What waiting on a command needs of its shell. */
export interface CommandWaitHooks {
  /** Called on each piece of output and at the command's end (undefined: nobody waits). */
  setListener(listener: (() => void) | undefined): void;
  /** C-c to the command (SIGINT to bash's group). */
  interrupt(): void;
  /** SIGKILL to what runs in the foreground. */
  killForeground(): void;
}

/**
 * Stops a command whatever it does: C-c (SIGINT ends the whole command line, a loop run by bash
 * itself included); a grace period later, SIGKILL to what runs in the foreground; still running a
 * grace period after that, bash itself loops with SIGINT ignored (`trap '' INT`), or the SIGINT
 * came as a child exited and bash took it for the child's: the shell is ended (with its sandbox),
 * as the third C-c does, and the next command starts a fresh one.
 */
export function stopCommand(stillRunning: () => boolean, hooks: Pick<CommandWaitHooks, 'interrupt' | 'killForeground'> & { killShell(): void }): void {
  hooks.interrupt();
  setTimeout(() => {
    if (!stillRunning()) return;
    hooks.killForeground();
    setTimeout(() => stillRunning() && hooks.killShell(), INTERRUPT_GRACE_MS).unref();
  }, INTERRUPT_GRACE_MS).unref();
}

/**
 * Waits for the command's end, its time limits (overall, and without output) or the caller's
 * abort (C-c, then a kill after a grace period); resolves with what it has then.
 */
export function waitForCommand(running: RunningCommand, options: ShellRunOptions, hooks: CommandWaitHooks, result: () => ShellRunResult): Promise<ShellRunResult> {
  running.collecting = true;
  return new Promise((resolve) => {
    const timers = new Set<NodeJS.Timeout>();
    let idleTimer: NodeJS.Timeout | undefined;
    const later = (ms: number, action: () => void): NodeJS.Timeout => {
      const timer = setTimeout(action, ms);
      timers.add(timer);
      return timer;
    };
    const finish = (): void => {
      for (const timer of timers) clearTimeout(timer);
      hooks.setListener(undefined);
      options.signal?.removeEventListener('abort', onAbort);
      resolve(result());
    };
    const onAbort = (): void => {
      hooks.interrupt();
      later(INTERRUPT_GRACE_MS, () => {
        hooks.killForeground();
        later(INTERRUPT_GRACE_MS, finish);
      });
    };
    hooks.setListener(() => {
      if (running.completion) return finish();
      if (idleTimer) clearTimeout(idleTimer);
      idleTimer = later(options.idleTimeoutMs, finish);
    });
    later(options.timeoutMs, finish);
    idleTimer = later(options.idleTimeoutMs, finish);
    options.signal?.addEventListener('abort', onAbort, { once: true });
    if (running.completion) finish();
    else if (options.signal?.aborted) onAbort();
  });
}

/** What a command did so far (taken from its output window): the tool's result. */
export function commandResult(running: RunningCommand, context: { cwd: string; restarted: boolean }): ShellRunResult {
  const { text, omitted } = running.window.take();
  const completion = running.completion;
  running.collecting = false;
  const result: ShellRunResult = {
    output: text,
    exitCode: completion ? completion.exitCode : null,
    cwd: context.cwd,
    timedOut: completion === undefined,
    stillRunning: completion === undefined,
    elapsedMs: (running.endedAt ?? Date.now()) - running.startedAt,
  };
  if (omitted) result.omitted = omitted;
  if (running.interrupted) result.interrupted = running.interrupted;
  running.interrupted = undefined;
  if (completion?.pid !== undefined) result.pid = completion.pid;
  if (completion?.logFile !== undefined) result.logFile = completion.logFile;
  if (context.restarted) result.restarted = true;
  return result;
}

/** A result when no command runs: what the shell printed meanwhile (background jobs), and a note. */
export function idleResult(idleOutput: OutputWindow, context: { cwd: string; note: string; restarted: boolean }): ShellRunResult {
  const { text, omitted } = idleOutput.take();
  const result: ShellRunResult = { output: joinOutput(text, context.note), exitCode: null, cwd: context.cwd, timedOut: false, stillRunning: false };
  if (context.restarted) result.restarted = true;
  if (omitted) result.omitted = omitted;
  return result;
}
