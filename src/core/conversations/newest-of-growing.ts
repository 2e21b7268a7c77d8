import type { ConversationRecord } from './conversation-record.js';
import type { ConversationSummary } from './summary-store.js';

/**
 * What only grows (updated_at, usage) keeps the newest of a record as another instance stored it,
 * the record this instance held (`current`), and what the log says (`summary`): the three may
 * arrive in any order. Changes `stored`, the record that replaces `current`. A quarantined record
 * keeps what it has.
 */
export function keepNewestOfGrowing(stored: ConversationRecord, current: Readonly<ConversationRecord> | undefined, summary: ConversationSummary | undefined): void {
  if (stored.quarantine) return;
  if (current && !current.quarantine) {
    if (current.updated_at > stored.updated_at) stored.updated_at = current.updated_at;
    if (usageSum(current.usage) > usageSum(stored.usage)) stored.usage = current.usage;
  }
  if (summary) keepSummary(stored, summary);
}

/** What only grows takes the summary's (of the log, or saved at a clean stop) where it is newer. */
export function keepSummary(record: ConversationRecord, summary: ConversationSummary): void {
  if (summary.updated_at > record.updated_at) record.updated_at = summary.updated_at;
  if (summary.usage && usageSum(summary.usage) > usageSum(record.usage)) record.usage = { ...summary.usage };
}

/** How far a usage total has grown (totals only grow: the larger one is the newer). */
function usageSum(usage: ConversationRecord['usage'] | NonNullable<ConversationSummary['usage']>): number {
  return usage.prompt_tokens + usage.completion_tokens + usage.cost;
}
