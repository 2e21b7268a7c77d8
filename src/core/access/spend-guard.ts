import type { BudgetPeriod } from './api-key.js';
import type { QuotaMeter } from './quota-meter.js';

/** Why a run may not ask the model again: its owner reached a spend limit. */
export interface SpendVerdict {
  limit: number;
  used: number;
  per: BudgetPeriod;
  /** The reason the run's `state_update` (status `paused`) carries. */
  message: string;
}

/** Called before each LLM request of a run: null lets it go, a verdict pauses the run. */
export type SpendCheck = (conversation: { id: string; owner?: string | null | undefined }) => Promise<SpendVerdict | null>;

/** The owner's spend against the ceilings on their keys (QuotaMeter.overSpend says which apply). */
export function createSpendGuard(meter: QuotaMeter): SpendCheck {
  return async (conversation) => {
    const owner = conversation.owner;
    if (!owner) return null;
    const over = await meter.overSpend(owner);
    if (!over) return null;
    const per = over.period ?? 'month';
    return {
      limit: over.max,
      used: over.used,
      per,
      message: `Paused: owner ${owner} reached the spend limit (max_cost_usd ${over.max} per ${per}; spent ${over.used.toFixed(6)}). POST /run to continue once the limit allows.`,
    };
  };
}
