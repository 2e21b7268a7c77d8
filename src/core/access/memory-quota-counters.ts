import type { Clock } from '../clock.js';
import { counterKey, type CounterWindow, type QuotaCounters } from './quota-counters.js';

/** A counter as it is kept: its window and what it counted. */
export interface CounterEntry extends CounterWindow {
  amount: number;
}

/** Where the added counters (spend) are kept between starts; taken ones (requests a minute) are not worth a write each. */
export interface CounterPersistence {
  load(): CounterEntry[];
  save(entries: CounterEntry[]): void;
}

const SWEEP_EVERY_MS = 60_000;

/** The counters of one process (a server on files is alone with its data dir). */
export class MemoryQuotaCounters implements QuotaCounters {
  private readonly taken = new Map<string, CounterEntry>();
  private readonly sums = new Map<string, CounterEntry>();
  private lastSweep = 0;

  constructor(private readonly options: { clock: Clock; persistence?: CounterPersistence | undefined }) {
    for (const entry of options.persistence?.load() ?? []) this.sums.set(counterKey(entry), { ...entry });
  }

  async take(window: CounterWindow, max: number): Promise<{ taken: boolean; used: number }> {
    this.sweep();
    const entry = held(this.taken, window);
    if (entry.amount >= max) return { taken: false, used: entry.amount };
    entry.amount += 1;
    return { taken: true, used: entry.amount - 1 };
  }

  async add(windows: readonly CounterWindow[], amount: number): Promise<void> {
    this.sweep();
    for (const window of windows) held(this.sums, window).amount += amount;
    this.options.persistence?.save([...this.sums.values()]);
  }

  async read(window: CounterWindow): Promise<number> {
    const key = counterKey(window);
    return this.sums.get(key)?.amount ?? this.taken.get(key)?.amount ?? 0;
  }

  /** Forgets the windows that are over, at most once a minute. */
  private sweep(): void {
    const now = this.options.clock.now();
    if (now - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = now;
    for (const counters of [this.taken, this.sums]) {
      for (const [key, entry] of counters) if (entry.until !== null && entry.until <= now) counters.delete(key);
    }
  }
}

function held(counters: Map<string, CounterEntry>, window: CounterWindow): CounterEntry {
  const key = counterKey(window);
  let entry = counters.get(key);
  if (!entry) counters.set(key, (entry = { name: window.name, start: window.start, until: window.until, amount: 0 }));
  return entry;
}
