import { DamagedDataError } from '../errors.js';
import type { EventLog } from '../events/event-log.js';
import type { ConversationRecord, ConversationRepository } from './conversation-record.js';
import { summaryFromLog } from './log-summary.js';
import { keepSummary } from './newest-of-growing.js';
import { placeholderRecord } from './placeholder-record.js';
import type { SavedSummaries } from './summary-store.js';

export interface LoadedRecords {
  /** Every record as stored, what only grows brought up to its summary; the quarantined ones (and placeholders for those unreadable) included. */
  records: ConversationRecord[];
  /** Per conversation not quarantined: how many events its log holds. */
  eventCounts: Map<string, number>;
  quarantined: { id: string; error: DamagedDataError }[];
  /** Loaded right after a clean stop (LoadedConversations.rightAfterCleanStop): no run can be open, no store was written since. */
  rightAfterCleanStop: boolean;
}

/**
 * Every conversation as stored, for ConversationStore.load. One whose stored data is damaged is
 * quarantined, not fatal: status `error` with the damage (its log refuses it too).
 *
 * `saved` summaries (of the last clean shutdown, or word that the records snapshot holds them),
 * or else the repository's (a log unchanged since a snapshot of it), spare reading each
 * conversation's log: the others' last events are read (log-summary.ts).
 */
export async function loadConversations(options: {
  repository: ConversationRepository;
  log: EventLog;
  integrityChecks?: readonly ((conversationId: string) => void)[] | undefined;
  saved: SavedSummaries | null;
  now: string;
}): Promise<LoadedRecords> {
  const { saved, log } = options;
  const inSnapshot = saved !== null && 'inSnapshot' in saved ? saved.inSnapshot : undefined;
  const summaries = saved !== null && !('inSnapshot' in saved) ? saved : null;
  const { records, damaged, summaryAt, rightAfterCleanStop = false } = await options.repository.loadAll({ afterCleanStop: saved !== null, ...(inSnapshot !== undefined && { snapshotToken: inSnapshot }) });
  const quarantined = [...damaged];
  const eventCounts = new Map<string, number>();
  for (let i = 0; i < records.length; i++) {
    const record = records[i]!;
    try {
      // Appends move updated_at in memory only (ConversationStore.touch): the summary, or else the log, says when the conversation last changed.
      const summary = summaries?.get(record.id) ?? summaryAt?.(i) ?? (await summaryFromLog(log, record.id));
      keepSummary(record, summary);
      eventCounts.set(record.id, summary.event_count);
      // Right after a clean stop the other stores are checked at first use instead.
      if (!rightAfterCleanStop) for (const check of options.integrityChecks ?? []) check(record.id);
    } catch (error) {
      if (!(error instanceof DamagedDataError)) throw error;
      quarantined.push({ id: record.id, error });
      log.quarantine(record.id, error);
      record.quarantine = error.damage;
      record.status = 'error';
    }
  }
  for (const { id, error } of damaged) log.quarantine(id, error);
  return { records: [...records, ...damaged.map(({ id, error }) => placeholderRecord({ id, damage: error.damage, now: options.now }))], eventCounts, quarantined, rightAfterCleanStop };
}
