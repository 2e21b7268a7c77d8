import type { SpendVerdict } from '../access/spend-guard.js';
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
 * A limit reached, found before an LLM request. `recorded`: an agent of the same run (a subagent)
 * reached it first and recorded its `budget_exceeded`: this agent ends too, without a second one.
 */
export interface BudgetVerdict {
  breach: BudgetBreach;
  recorded: boolean;
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
 * The check before each LLM request of a run and of its subagents: the first limit reached
 * decides. A `notify` breach is reported once per run and per limit, and the run goes on; `pause`
 * and `stop` end the agent that met them, and every other agent of the run at its next request.
 * A run never goes past a limit without its breach being recorded.
 */
export class BudgetGuard {
  private readonly notified = new Set<SpendLimit>();
  /** The breaches that ended an agent of the run, by limit, as the event said them. */
  private readonly ended = new Map<SpendLimit, string>();

  constructor(private readonly limits: readonly SpendLimit[]) {}

  /** The breach met now (null: nothing, or a `notify` already told). */
  check(spend: Spend): BudgetVerdict | null {
    for (const limit of this.limits) {
      const breach = limit.check(spend);
      if (!breach) continue;
      if (breach.action !== 'notify') {
        // The same limit again (not one raised meanwhile by PUT /config, still short): recorded once.
        const said = JSON.stringify([breach.limit, breach.per, breach.action]);
        const recorded = this.ended.get(limit) === said;
        this.ended.set(limit, said);
        return { breach, recorded };
      }
      if (this.notified.has(limit)) continue;
      this.notified.add(limit);
      return { breach, recorded: false };
    }
    return null;
  }
}

/** What a run and each of its subagents check before an LLM request (run-context.ts). */
export interface RunSpendChecks {
  checkBudget: () => BudgetVerdict | null;
  spendCheck?: () => Promise<SpendVerdict | null>;
}

/**
 * The checks of one run, shared with its subagents: their spending is the run's (and the
 * conversation's), so the conversation's budget and the owner's spend limit cover what a subagent
 * asks too, and one guard tells a `notify` once and records a reached limit once per run.
 */
export function runSpendChecks(options: {
  budget: () => Budget | null;
  spend: () => Spend;
  /** The owner's spend limit for this conversation (core/access/spend-guard.ts). */
  ownerSpend?: (() => Promise<SpendVerdict | null>) | undefined;
}): RunSpendChecks {
  const guard = new BudgetGuard([currentBudgetLimit(options.budget)]);
  return { checkBudget: () => guard.check(options.spend()), ...(options.ownerSpend && { spendCheck: options.ownerSpend }) };
}
