/**
 * Clean-up that need not happen in the callback that found it, done a few items per event-loop
 * turn: a burst (a thousand sandboxes exiting at shutdown, each closing its control pipe and
 * releasing its cgroups) then never holds the loop in one stretch.
 */
export class SpreadWork {
  private readonly queue: (() => void)[] = [];
  private scheduled = false;

  constructor(private readonly perTurn = 8) {}

  add(task: () => void): void {
    this.queue.push(task);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.drain());
  }

  private drain(): void {
    for (const task of this.queue.splice(0, this.perTurn)) {
      try {
        task();
      } catch {
        // clean-up is best effort: one failure does not stop the others
      }
    }
    if (this.queue.length > 0) setImmediate(() => this.drain());
    else this.scheduled = false;
  }
}

/** The process-wide queue for sandbox clean-up. */
export const sandboxCleanup = new SpreadWork();
