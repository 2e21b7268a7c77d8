import { isoTimestamp, systemClock, type Clock } from '../clock.js';
import type { BudgetPeriod, KeyLimits } from './api-key.js';
import type { Principal } from './principal.js';
import type { CounterWindow, QuotaCounters } from './quota-counters.js';

/** A limit a request went past: the 429's details. */
export interface QuotaExceeded {
  limit: 'rpm' | 'concurrent_runs' | 'conversations' | 'max_cost_usd';
  max: number;
  used: number;
  /** When the limit frees up (null: when something the owner holds ends, e.g. a run; or never, for all-time spend). */
  resetsAt: number | null;
  /** The budget period of a spend limit. */
  period?: BudgetPeriod;
}

/** What the owner holds now, as the meter asks it. */
export interface OwnerHoldings {
  conversations(owner: string): number;
  runningRuns(owner: string): number;
}

/** The limits of each key `owner` holds (every key of theirs, whichever is in use). */
export type OwnerKeyLimits = (owner: string) => Promise<readonly KeyLimits[]>;

const MINUTE_MS = 60_000;
const PERIODS: readonly BudgetPeriod[] = ['day', 'month', 'total'];

/**
 * The limits of the keys. Per key, as the key is used: requests per minute (a fixed window on the
 * clock), and the owner's conversations and runs in progress when the key creates or starts one.
 * Per owner: spend. It is one ledger per owner (each LLM call's cost, whichever key started the
 * run), and each `max_cost_usd` set on any key of the owner is a ceiling on it over that key's
 * `budget_period`: an owner cannot spend past a ceiling by using another key, and a run, which
 * has no key of its own between requests, is held to the same ceilings as a request.
 * The counters are `QuotaCounters`: shared by every instance on PostgreSQL.
 */
export class QuotaMeter {
  private readonly clock: Clock;
  /** Spend being added: a check waits for it, so that a run's next request sees its last call's cost. */
  private readonly adding = new Set<Promise<void>>();

  constructor(
    private readonly deps: { holdings: OwnerHoldings; counters: QuotaCounters; keyLimits: OwnerKeyLimits },
    options: { clock?: Clock | undefined } = {},
  ) {
    this.clock = options.clock ?? systemClock;
  }

  /** Counts this request against the key's rpm; null when the key has none (nothing to count, no promise). */
  request(principal: Principal): Promise<QuotaExceeded | null> | null {
    const rpm = principal.limits?.rpm;
    if (rpm === undefined) return null;
    const now = this.clock.now();
    const start = now - (now % MINUTE_MS);
    const window: CounterWindow = { name: `rpm:${principal.keyId}`, start, until: start + MINUTE_MS };
    return this.deps.counters.take(window, rpm).then(({ taken, used }): QuotaExceeded | null => (taken ? null : { limit: 'rpm', max: rpm, used, resetsAt: start + MINUTE_MS }));
  }

  /** Before a conversation is created. */
  newConversation(principal: Principal): QuotaExceeded | null {
    const max = principal.limits?.conversations;
    if (max === undefined) return null;
    const used = this.deps.holdings.conversations(principal.owner);
    return used >= max ? { limit: 'conversations', max, used, resetsAt: null } : null;
  }

  /** Before a run starts: the key's limit on runs in progress, then the owner's spend. */
  async newRun(principal: Principal): Promise<QuotaExceeded | null> {
    const max = principal.limits?.concurrent_runs;
    if (max !== undefined) {
      const used = this.deps.holdings.runningRuns(principal.owner);
      if (used >= max) return { limit: 'concurrent_runs', max, used, resetsAt: null };
    }
    return this.overSpend(principal.owner);
  }

  /**
   * The owner's spend against every ceiling on their keys; when several are reached, the one
   * that frees up last (a day's ceiling reached under a reached month's still waits for the month).
   */
  async overSpend(owner: string): Promise<QuotaExceeded | null> {
    const ceilings = (await this.deps.keyLimits(owner)).filter((limits) => limits.max_cost_usd !== undefined);
    if (ceilings.length === 0) return null;
    if (this.adding.size > 0) await Promise.all(this.adding);
    const now = this.clock.now();
    let worst: QuotaExceeded | null = null;
    for (const limits of ceilings) {
      const period = limits.budget_period ?? 'month';
      const max = limits.max_cost_usd!;
      const used = await this.deps.counters.read(spendWindow(owner, period, now));
      if (used < max) continue;
      const over: QuotaExceeded = { limit: 'max_cost_usd', max, used, resetsAt: periodEnd(period, now), period };
      if (!worst || freesLater(over, worst)) worst = over;
    }
    return worst;
  }

  /** An LLM call of `owner`'s cost this much: added to the owner's day, month and all time. */
  spent(owner: string, cost: number): Promise<void> {
    if (!(cost > 0)) return Promise.resolve();
    const now = this.clock.now();
    const adding = this.deps.counters.add(
      PERIODS.map((period) => spendWindow(owner, period, now)),
      cost,
    );
    const settled = adding.catch(() => {});
    this.adding.add(settled);
    void settled.finally(() => this.adding.delete(settled));
    return adding;
  }

  /** The 429's details: `limit` the figure, `name` which one. */
  static details(over: QuotaExceeded): { name: string; limit: number; used: number; resets_at: string | null } {
    return { name: over.limit, limit: over.max, used: over.used, resets_at: over.resetsAt === null ? null : isoTimestamp(over.resetsAt) };
  }
}

function freesLater(a: QuotaExceeded, b: QuotaExceeded): boolean {
  if (b.resetsAt === null) return false;
  return a.resetsAt === null || a.resetsAt > b.resetsAt;
}

function spendWindow(owner: string, period: BudgetPeriod, now: number): CounterWindow {
  return { name: `spend:${owner}:${period}`, start: periodStart(period, now), until: periodEnd(period, now) };
}

function periodStart(period: BudgetPeriod, now: number): number {
  const date = new Date(now);
  if (period === 'day') return Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate());
  if (period === 'month') return Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
  return 0;
}

function periodEnd(period: BudgetPeriod, now: number): number | null {
  const date = new Date(now);
  if (period === 'day') return Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate() + 1);
  if (period === 'month') return Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
  return null;
}
