import { ConversationQuarantinedError, NotFoundError, type Damage } from '../errors.js';
import type { Page } from '../pagination.js';
import type { Conversation } from '../schemas/conversation.js';
import type { ConversationStatus } from '../schemas/event.js';
import type { ConversationRecord } from './conversation-record.js';
import { ConversationIndex, type ListConversationsQuery } from './conversation-index.js';
import { ConversationViews } from './conversation-views.js';
import { publicConversation } from './public-conversation.js';
import type { ConversationSummary } from './summary-store.js';
import { SecretChanges } from './secret-changes.js';

/**
 * The conversation records as held in memory: indexed for listing, each with its event count and
 * the view clients see, and every way to read them. Records change only through
 * ConversationStore, which adds the named transitions and their saving to this.
 */
export class HeldConversations {
  protected readonly records = new ConversationIndex();
  /** Per conversation: how many events its log holds (the seq of the last one). */
  protected eventCounts = new Map<string, number>();
  /** What clients see of each record, made again only after it changed (dropped in mutable, touch, index, unindex). */
  protected readonly views = new ConversationViews();
  /** The changes of the set of secret values held (a record added or removed, its secrets set). */
  readonly secretChanges = new SecretChanges();

  get(id: string): Conversation {
    return this.toPublic(this.find(id));
  }

  /** The internal record, to read (for services of the same conversation: secrets, agent, files); refused while quarantined. */
  record(id: string): Readonly<ConversationRecord> {
    const record = this.find(id);
    if (record.quarantine) throw new ConversationQuarantinedError(id, record.quarantine);
    return record;
  }

  /** The record whatever its state, quarantined included (deletion). */
  find(id: string): Readonly<ConversationRecord> {
    const record = this.records.get(id);
    if (!record) throw new NotFoundError('conversation', id);
    return record;
  }

  has(id: string): boolean {
    return this.records.has(id);
  }

  /** Refuses a write to a conversation quarantined (its stored data found damaged); one that is gone is not refused here. */
  refuseIfQuarantined(id: string): void {
    const record = this.records.get(id);
    if (record?.quarantine) throw new ConversationQuarantinedError(id, record.quarantine);
  }

  list(query: ListConversationsQuery): Page<Conversation> {
    const page = this.records.page(query);
    // Made for the page and not kept: a listing of every conversation would push the kept views out.
    return { items: page.items.map((record) => publicConversation(record, this.eventCounts.get(record.id) ?? 0)), next_page_id: page.next_page_id };
  }

  count(status?: ConversationStatus, owner?: string): number {
    return this.records.count(status, owner);
  }

  countsByStatus(): Record<ConversationStatus, number> {
    return this.records.countsByStatus();
  }

  /** Every conversation but the quarantined ones. */
  *all(): IterableIterator<Readonly<ConversationRecord>> {
    for (const record of this.records.values()) if (!record.quarantine) yield record;
  }

  /** Conversations quarantined because their stored data is damaged. */
  quarantined(): { id: string; damage: Damage }[] {
    return [...this.records.quarantined()].map((record) => ({ id: record.id, damage: record.quarantine! }));
  }

  /** The same object until the conversation changes (see ConversationViews). */
  toPublic(record: Readonly<ConversationRecord>): Conversation {
    return this.views.of(record, this.eventCounts.get(record.id) ?? 0);
  }

  /** What start-up needs of each conversation that is not quarantined, to be saved at shutdown. */
  summaries(): Map<string, ConversationSummary> {
    const out = new Map<string, ConversationSummary>();
    for (const record of this.all()) out.set(record.id, { updated_at: record.updated_at, event_count: this.eventCounts.get(record.id) ?? 0, usage: record.usage });
    return out;
  }

  protected touch(record: ConversationRecord, timestamp: string): void {
    if (timestamp <= record.updated_at) return;
    this.views.drop(record);
    const old = record.updated_at;
    record.updated_at = timestamp;
    this.records.updated(record, old);
  }

  protected index(record: ConversationRecord): void {
    this.views.drop(record);
    this.secretChanges.changed(record.id);
    this.records.add(record);
  }

  protected indexAll(records: readonly ConversationRecord[]): void {
    this.secretChanges.changed(null);
    this.records.addAll(records);
  }

  protected unindex(record: ConversationRecord): void {
    this.views.drop(record);
    this.secretChanges.changed(record.id);
    this.records.remove(record);
    this.eventCounts.delete(record.id);
  }
}
