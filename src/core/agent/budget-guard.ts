import type { Budget } from '../schemas/budget.js';
import type { Usage } from '../schemas/usage.js';

/** What was spent so far: by the run, and by the conversation (the run's spending included). */
export interface Spend {
  run: Usage;
  conversation: Usage;
}

/** A limit reached, as the `budget_exceeded` event says it. */
export interface BudgetBreach {
  limit: { max_cost_usd?: number; max_tokens?: number };
  used: { cost_usd: number; tokens: number };
  per: 'run' | 'conversation';
  action: 'pause' | 'stop' | 'notify';
}

/**
 * One spending limit the loop checks before each LLM request. The conversation's budget is one;
 * others (an API key's quota) plug in beside it.
 */
export interface SpendLimit {
  check(spend: Spend): BudgetBreach | null;
}

/** A conversation's `budget` (or the server's default) as a SpendLimit. */
export function budgetLimit(budget: Budget): SpendLimit {
  return {
    check(spend) {
      const usage = budget.per === 'conversation' ? spend.conversation : spend.run;
      const used = { cost_usd: usage.cost, tokens: usage.prompt_tokens + usage.completion_tokens };
      const overCost = budget.max_cost_usd !== undefined && used.cost_usd >= budget.max_cost_usd;
      const overTokens = budget.max_tokens !== undefined && used.tokens >= budget.max_tokens;
      if (!overCost && !overTokens) return null;
      const limit = { ...(budget.max_cost_usd !== undefined && { max_cost_usd: budget.max_cost_usd }), ...(budget.max_tokens !== undefined && { max_tokens: budget.max_tokens }) };
      return { limit, used, per: budget.per, action: budget.on_exceed };
    },
  };
}

/** The budget in force when checked (the conversation's, else the server's default; it may change mid-run) as a SpendLimit. */
export function currentBudgetLimit(budget: () => Budget | null): SpendLimit {
  return { check: (spend) => { const current = budget(); return current ? budgetLimit(current).check(spend) : null; } };
}

/**
 * The check before each LLM request of a run: the first limit reached decides. A `notify` breach
 * is reported once per run and per limit, and the run goes on; `pause` and `stop` end the run.
 * A run never goes past a limit without its breach being recorded.
 */
export class BudgetGuard {
  private readonly notified = new Set<SpendLimit>();

  constructor(private readonly limits: readonly SpendLimit[]) {}

  /** The breach to record now (null: nothing new), and whether the run must end. */
  check(spend: Spend): BudgetBreach | null {
    for (const limit of this.limits) {
      const breach = limit.check(spend);
      if (!breach) continue;
      if (breach.action !== 'notify') return breach;
      if (this.notified.has(limit)) continue;
      this.notified.add(limit);
      return breach;
    }
    return null;
  }
}
