import type { BashProcess } from './bash-process.js';
import type { WorkdirGuard } from './workdir-guard.js';

/**
 * The workdir's limit between commands, for a shell whose jobs run on (`cmd &`, or adopted by the
 * sandbox's init): measured as during a command while the shell has jobs. Whether it has is read
 * at each measurement's time (the first one interval after the command, unless the next command
 * came first and ended the watch): a shell without jobs is looked at once and then not watched.
 */
export class ShellJobsWatch {
  private stopWatching: (() => void) | undefined;

  constructor(private readonly guard: WorkdirGuard) {}

  /** Watches `proc` while `idle()` holds and it has jobs (once at a time); past the limit, `onExceeded` with the message for the LLM. */
  start(proc: BashProcess, idle: () => boolean, onExceeded: (message: string) => void): void {
    if (this.stopWatching || proc.exited) return;
    this.stopWatching = this.guard.watch(
      (message) => {
        this.stopWatching = undefined;
        onExceeded(message);
      },
      {
        what: 'the shell with its background jobs',
        processes: () => proc.processes(),
        keepWatching: () => {
          const watching = idle() && proc.hasJobs();
          if (!watching) this.stopWatching = undefined;
          return watching;
        },
      },
    );
  }

  /** The next command came, or the shell is gone: no more watching (a measurement under way is dropped). */
  end(): void {
    this.stopWatching?.();
    this.stopWatching = undefined;
  }
}
