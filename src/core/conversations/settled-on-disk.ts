import type { ConversationStatus } from '../schemas/event.js';
import type { ConversationRecord } from './conversation-record.js';

/**
 * What the stored file of each record says of its state, where that is settled: a status with
 * no current run and no actions waiting. A status change to exactly that state changes nothing
 * on disk but what only grows (updated_at, usage), which the log holds too (ConversationStore.setStatus).
 */
export class SettledOnDisk {
  /** Per record object, the settled status its file was last written with; absent: unknown or not settled. */
  private readonly status = new WeakMap<Readonly<ConversationRecord>, ConversationStatus>();

  /** The record was just written (or read) as it is now. */
  saved(record: Readonly<ConversationRecord>): void {
    if (record.current_run_id === null && record.pending_actions.length === 0) this.status.set(record, record.status);
    else this.status.delete(record);
  }

  /** Whether the record's file holds its state now (its status, no current run, nothing pending). */
  holds(record: Readonly<ConversationRecord>): boolean {
    return record.current_run_id === null && record.pending_actions.length === 0 && this.status.get(record) === record.status;
  }
}
