import type { ConversationStatus } from '../schemas/event.js';
import type { ConversationRecord } from './conversation-record.js';

/**
 * What the stored file of each record says of its state, where that is settled: a status with
 * no current run and no actions waiting. A status change to exactly that state changes nothing
 * on disk but what only grows (updated_at, usage), which the log holds too (ConversationStore.setStatus).
 */
export class SettledOnDisk {
  /**
   * Per record object, the settled status its file was last written with; null: not settled, or
   * not on disk yet. Absent: a record loaded at start-up and not changed since, whose file holds
   * its state as it is (see `changing`: start-up does not walk the records to note each one).
   */
  private readonly status = new WeakMap<Readonly<ConversationRecord>, ConversationStatus | null>();

  /** The record was just written as it is now. */
  saved(record: Readonly<ConversationRecord>): void {
    this.status.set(record, settledStatus(record));
  }

  /** A record not on disk yet (added, to be persisted). */
  unsaved(record: Readonly<ConversationRecord>): void {
    this.status.set(record, null);
  }

  /** The record is about to change: one loaded at start-up and unchanged since is noted first as its file has it (as it is now). */
  changing(record: Readonly<ConversationRecord>): void {
    if (!this.status.has(record)) this.status.set(record, settledStatus(record));
  }

  /**
   * The settled status the record's file still holds while a run whose start was not saved is in
   * progress (see ConversationStore.startRunning); null otherwise. A save meanwhile writes the
   * record with it: the run's end to that status then finds the file as it should be.
   */
  statusKeptDuringRun(record: Readonly<ConversationRecord>): ConversationStatus | null {
    if (record.status !== 'running' || record.pending_actions.length > 0) return null;
    return this.status.get(record) ?? null;
  }

  /** Whether the record's file holds its state now (its status, no current run, nothing pending). */
  holds(record: Readonly<ConversationRecord>): boolean {
    return settledStatus(record) !== null && this.status.get(record) === record.status;
  }
}

function settledStatus(record: Readonly<ConversationRecord>): ConversationStatus | null {
  return record.current_run_id === null && record.pending_actions.length === 0 ? record.status : null;
}
