import type { Sql } from 'postgres';
import { isoTimestamp } from '../../core/clock.js';
import type { ConversationSummary, SummaryStore } from '../../core/conversations/summary-store.js';

/**
 * Conversation summaries from the log heads: in PostgreSQL they are always true (every append
 * moves its conversation's head in the same transaction), so start-up reads one table instead of
 * each conversation's last event, and nothing needs saving at shutdown.
 */
export class PgSummaryStore implements SummaryStore {
  constructor(private readonly sql: Sql) {}

  async take(): Promise<Map<string, ConversationSummary>> {
    const rows = await this.sql<{ conversation_id: string; last_seq: string; last_ts_ms: string }[]>`SELECT conversation_id, last_seq, last_ts_ms FROM agentd_log_heads`;
    const summaries = new Map<string, ConversationSummary>();
    for (const row of rows) summaries.set(row.conversation_id, { updated_at: isoTimestamp(Number(row.last_ts_ms)), event_count: Number(row.last_seq) });
    return summaries;
  }

  async save(): Promise<void> {}
}
