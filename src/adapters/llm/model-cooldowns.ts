/**
 * Models that failed recently, shared by every conversation of the server: a request skips a
 * model cooling down (when another one is left) instead of waiting for it to fail again.
 */
export class ModelCooldowns {
  private readonly until = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  /** The model at `key` failed: skip it for `seconds` (0: not at all). */
  fail(key: string, seconds: number): void {
    if (seconds <= 0) return;
    this.until.set(key, this.now() + seconds * 1000);
  }

  /** It answered: no longer skipped. */
  recover(key: string): void {
    this.until.delete(key);
  }

  cooling(key: string): boolean {
    const until = this.until.get(key);
    if (until === undefined) return false;
    if (until > this.now()) return true;
    this.until.delete(key);
    return false;
  }
}
