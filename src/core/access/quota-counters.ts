/** One counter of a limit over a window of time: a key's minute, an owner's day, month or all time. */
export interface CounterWindow {
  /** What is counted, e.g. `rpm:<key id>` or `spend:<owner>:day`. */
  name: string;
  /** The window's start (ms since the epoch; 0 for all time). */
  start: number;
  /** When the window is over and its counter may be forgotten (null: never). */
  until: number | null;
}

/**
 * Where the limits' counters live: in this process (files; spend kept in the data dir), or in
 * PostgreSQL, where every instance counts in the same rows, so that two instances hold one limit.
 */
export interface QuotaCounters {
  /** Counts one in the window unless `max` are counted there already; `used` is the count before. */
  take(window: CounterWindow, max: number): Promise<{ taken: boolean; used: number }>;
  /** Adds `amount` to each window's counter, in one step. */
  add(windows: readonly CounterWindow[], amount: number): Promise<void>;
  read(window: CounterWindow): Promise<number>;
}

/** A window's counter in a map: its name and start. */
export function counterKey(window: CounterWindow): string {
  return `${window.name}\u0000${window.start}`;
}
