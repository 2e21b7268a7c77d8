import type { EventLog } from '../events/event-log.js';
import type { ConversationSummary } from './summary-store.js';

/**
 * A conversation's summary read from its log (start-up without a clean stop's summaries): its
 * last event, and the totals of its last `usage` event. The record's own usage may lag those:
 * a run end that leaves the record's status as its file has it saves no record
 * (ConversationStore.setStatus), and a usage is saved with the next change of the record only.
 */
export async function summaryFromLog(log: EventLog, conversationId: string): Promise<ConversationSummary> {
  const [[last], [usage]] = await Promise.all([log.read(conversationId, { order: 'desc', limit: 1 }), log.read(conversationId, { order: 'desc', limit: 1, kinds: ['usage'] })]);
  const totals = usage?.event.kind === 'usage' ? usage.event.totals : undefined;
  return { updated_at: last?.event.timestamp ?? '', event_count: last?.event.seq ?? 0, ...(totals && { usage: totals }) };
}
