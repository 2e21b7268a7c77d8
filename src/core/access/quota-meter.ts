import { isoTimestamp, systemClock, type Clock } from '../clock.js';
import type { BudgetPeriod, KeyLimits } from './api-key.js';
import type { Principal } from './principal.js';

/** A limit a request went past: the 429's details. */
export interface QuotaExceeded {
  limit: 'rpm' | 'concurrent_runs' | 'conversations' | 'max_cost_usd';
  max: number;
  used: number;
  /** When the limit frees up (null: when something the owner holds ends, e.g. a run). */
  resetsAt: number | null;
}

/** What the owner holds now, as the meter asks it. */
export interface OwnerHoldings {
  conversations(owner: string): number;
  runningRuns(owner: string): number;
}

const MINUTE_MS = 60_000;

/**
 * Requests per minute per key (a fixed window on the clock), the owner's conversations and runs
 * in progress, and the owner's spend per budget period (a ledger fed by each LLM call's cost).
 */
export class QuotaMeter {
  private readonly clock: Clock;
  private readonly windows = new Map<string, { start: number; count: number }>();
  /** Spend per owner and period start. */
  private readonly spend = new Map<string, number>();
  private readonly ownerLimits = new Map<string, KeyLimits>();

  constructor(
    private readonly holdings: OwnerHoldings,
    options: { clock?: Clock } = {},
  ) {
    this.clock = options.clock ?? systemClock;
  }

  /** Counts this request against the key's rpm; the limit it is over, if any. */
  request(principal: Principal): QuotaExceeded | null {
    if (principal.limits) this.ownerLimits.set(principal.owner, principal.limits);
    const rpm = principal.limits?.rpm;
    if (rpm === undefined) return null;
    const now = this.clock.now();
    const start = now - (now % MINUTE_MS);
    let window = this.windows.get(principal.keyId);
    if (!window || window.start !== start) this.windows.set(principal.keyId, (window = { start, count: 0 }));
    if (window.count >= rpm) return { limit: 'rpm', max: rpm, used: window.count, resetsAt: start + MINUTE_MS };
    window.count += 1;
    return null;
  }

  /** Before a conversation is created. */
  newConversation(principal: Principal): QuotaExceeded | null {
    const max = principal.limits?.conversations;
    if (max === undefined) return null;
    const used = this.holdings.conversations(principal.owner);
    return used >= max ? { limit: 'conversations', max, used, resetsAt: null } : null;
  }

  /** Before a run starts: runs in progress and the spend. */
  newRun(principal: Principal): QuotaExceeded | null {
    const max = principal.limits?.concurrent_runs;
    if (max !== undefined) {
      const used = this.holdings.runningRuns(principal.owner);
      if (used >= max) return { limit: 'concurrent_runs', max, used, resetsAt: null };
    }
    return this.overSpend(principal.owner, principal.limits);
  }

  /** The owner's spend against `limits.max_cost_usd`, over when it reached it. */
  overSpend(owner: string, limits: KeyLimits | null): QuotaExceeded | null {
    const max = limits?.max_cost_usd;
    if (max === undefined) return null;
    const period = limits?.budget_period ?? 'month';
    const now = this.clock.now();
    const used = this.spend.get(spendKey(owner, period, now)) ?? 0;
    return used >= max ? { limit: 'max_cost_usd', max, used, resetsAt: periodEnd(period, now) } : null;
  }

  /** An LLM call of `owner`'s cost this much. */
  spent(owner: string, cost: number): void {
    if (!(cost > 0)) return;
    const now = this.clock.now();
    for (const period of PERIODS) {
      const key = spendKey(owner, period, now);
      this.spend.set(key, (this.spend.get(key) ?? 0) + cost);
    }
  }

  /** The limits last seen on a key of `owner`: what a run of theirs is held to between requests. */
  limitsOf(owner: string): KeyLimits | null {
    return this.ownerLimits.get(owner) ?? null;
  }

  /** The 429's details: `limit` the figure, `name` which one. */
  static details(over: QuotaExceeded): { name: string; limit: number; used: number; resets_at: string | null } {
    return { name: over.limit, limit: over.max, used: over.used, resets_at: over.resetsAt === null ? null : isoTimestamp(over.resetsAt) };
  }
}

const PERIODS: readonly BudgetPeriod[] = ['day', 'month', 'total'];

function spendKey(owner: string, period: BudgetPeriod, now: number): string {
  return `${owner}\u0000${period}\u0000${periodStart(period, now)}`;
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
