import { DatabaseUnavailableError } from '../../core/errors.js';

export { DatabaseUnavailableError };

/**
 * Writes to PostgreSQL behind the synchronous store ports (conversation records, runs, webhook
 * state): the in-memory state changes at once and its write is queued, in order per key.
 * `settled()` is the durability barrier: it resolves once every write queued before the call
 * is committed, and the HTTP layer awaits it before any response leaves, so whatever a client
 * was told is stored is in the database (kill -9 included). A write that fails (database down)
 * is retried in order until it succeeds or the pipeline closes; meanwhile `settled()` reports
 * the database unreachable at once (a write is failing) or after `barrierMs` (none answered).
 */
export class WritePipeline {
  private readonly tails = new Map<string, Promise<void>>();
  private closed = false;
  /** The last attempt of some write failed and nothing committed since: the barrier answers at once rather than wait. */
  private failing = false;
  /** Writes committed, and attempts that failed and were retried (for /metrics). */
  readonly stats = { written: 0, retried: 0 };

  constructor(private readonly options: { retryMs?: number; barrierMs?: number; onError?: (error: unknown) => void } = {}) {}

  /** Queues `write` after the earlier writes of `key`. */
  run(key: string, write: () => Promise<unknown>): void {
    const previous = this.tails.get(key) ?? Promise.resolve();
    const next = previous.then(() => this.attempt(write));
    this.tails.set(key, next);
    void next.then(() => {
      if (this.tails.get(key) === next) this.tails.delete(key);
    });
  }

  get pending(): number {
    return this.tails.size;
  }

  /** Resolves when every write queued so far is committed. */
  async settled(): Promise<void> {
    if (this.tails.size === 0) return;
    if (this.failing) throw new DatabaseUnavailableError('The database is unreachable: this change is kept and its write retried until it is back. Retry the request later.');
    const all = Promise.all([...this.tails.values()]);
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new DatabaseUnavailableError('The database did not confirm the write in time; it keeps being retried. Retry the request later.')), this.options.barrierMs ?? 5_000);
    });
    try {
      await Promise.race([all, limit]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Waits for what is queued (up to the barrier), then refuses retries. */
  async close(): Promise<void> {
    await this.settled().catch(() => {});
    this.closed = true;
  }

  private async attempt(write: () => Promise<unknown>): Promise<void> {
    for (;;) {
      try {
        await write();
        this.stats.written++;
        this.failing = false;
        return;
      } catch (error) {
        this.options.onError?.(error);
        this.failing = true;
        if (this.closed) return;
        this.stats.retried++;
        await new Promise((resolve) => setTimeout(resolve, this.options.retryMs ?? 500));
      }
    }
  }
}
