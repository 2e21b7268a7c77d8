import { z } from 'zod';
import { Usage } from '../schemas/usage.js';

/** What the log readers keep about a conversation, so that start-up need not read its log. */
export const ConversationSummary = z.object({
  /** The time of the last event (or of the last change to the record, whichever is later). */
  updated_at: z.string(),
  /** How many events the log holds (the seq of the last one). */
  event_count: z.number().int().min(0),
  /**
   * The conversation's usage totals as the log last recorded them (its newest `usage` event), or
   * as held at a clean stop: a run end that saved no record (ConversationStore.setStatus) left the
   * record's own totals behind them. Absent when unknown.
   */
  usage: Usage.optional(),
});
export type ConversationSummary = z.infer<typeof ConversationSummary>;


/**
 * What a clean shutdown left for the next start: each conversation's summary, or word that the
 * records snapshot written at the same shutdown holds them (`inSnapshot`: the token that snapshot
 * carries; files, see record-snapshot.ts).
 */
export type SavedSummaries = ReadonlyMap<string, ConversationSummary> | { readonly inSnapshot: string };

/**
 * The conversation summaries saved at a clean shutdown. They are only true until the next
 * append, so start-up takes them (removes them from storage) before anything is appended: after
 * a crash there are none, and each conversation's log is read instead.
 */
export interface SummaryStore {
  /** The summaries of the last clean shutdown, removed from storage; null when there are none to trust. */
  take(): Promise<SavedSummaries | null>;
  /** `inSnapshot`: the records snapshot just saved holds them, with this token: only that word is saved. */
  save(summaries: ReadonlyMap<string, ConversationSummary>, options?: { inSnapshot?: string }): Promise<void>;
}
