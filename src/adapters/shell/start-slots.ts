/**
 * At most `limit` pieces of work at once; the others wait their turn in the order they came.
 * Shell start-ups go through one of these (see BashShellFactory): a sandboxed shell's start is a
 * handful of process spawns and namespaces, work that the machine does one core at a time, so a
 * hundred started together all take a hundred times as long, and each would run out of its own
 * start-up time; started a few at a time, each takes its usual fraction of a second.
 */
export class StartSlots {
  private free: number;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`StartSlots needs a limit of at least 1, not ${limit}`);
    this.free = limit;
  }

  /** How many are waiting for a slot. */
  get queued(): number {
    return this.waiting.length;
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.free > 0) this.free--;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await work();
    } finally {
      // The slot passes straight to the next in line, or is free again.
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    }
  }
}
