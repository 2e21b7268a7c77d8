import { decodePageId, encodePageId, isKeyCursor, type Page } from '../pagination.js';
import type { ConversationStatus } from '../schemas/event.js';
import type { ConversationRecord } from './conversation-record.js';
import type { SandboxSettings } from '../schemas/conversation.js';
import { SortedIndex } from './sorted-index.js';
import { holdUserKeyed, holdUserKeyedTogether, shareFirstSights, type FirstSights } from './user-keyed.js';

export interface ListConversationsQuery {
  status?: ConversationStatus | undefined;
  /** Only this owner's conversations. */
  owner?: string | undefined;
  sort: 'created_at' | 'updated_at';
  order: 'asc' | 'desc';
  pageId?: string | undefined;
  limit: number;
}

/**
 * The conversation records held in memory, by id and sorted by created_at and by updated_at
 * for listing. The store (conversation-store.ts) owns the records and decides what goes in; this
 * only keeps them findable and counts them.
 */
export class ConversationIndex {
  private readonly byId = new Map<string, ConversationRecord>();
  private readonly byCreated = new SortedIndex<ConversationRecord>((record) => record.created_at);
  private readonly byUpdated = new SortedIndex<ConversationRecord>((record) => record.updated_at);
  /** Conversations mostly have the same tool list: loaded records share one frozen array per list (~140 bytes each less). */
  private readonly toolLists = new Map<string, string[]>();
  /** Sandbox settings by their network: records loaded with the same settings share one object (they are replaced, never changed). */
  private readonly sandboxes = new Map<SandboxSettings['network'], SandboxSettings>();
  /** The list sharedTools gave last. */
  private lastToolList: string[] | undefined;
  /** Records added together (addAll) and not yet in each sorted order: put there at the first need, or by sortLoaded. */
  private unsortedCreated: ConversationRecord[] = [];
  private unsortedUpdated: ConversationRecord[] = [];
  /** The records held whose stored data is damaged (`quarantine` set): /health names them at every probe, without a walk of all records. */
  private readonly damaged = new Set<ConversationRecord>();

  get(id: string): ConversationRecord | undefined {
    return this.byId.get(id);
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  get size(): number {
    return this.byId.size;
  }

  values(): IterableIterator<ConversationRecord> {
    return this.byId.values();
  }

  /** The records held that are quarantined. */
  quarantined(): ReadonlySet<ConversationRecord> {
    return this.damaged;
  }

  /** A record held was quarantined in place (its log found damaged on first use). */
  quarantinedInPlace(record: ConversationRecord): void {
    if (this.byId.get(record.id) === record && record.quarantine) this.damaged.add(record);
  }

  /** Held with its user-keyed maps in dictionary mode (see user-keyed.ts). */
  add(record: ConversationRecord): void {
    this.sortLoaded();
    this.byId.set(record.id, holdUserKeyed(record));
    if (record.quarantine) this.damaged.add(record);
    this.byCreated.insert(record);
    this.byUpdated.insert(record);
  }

  /**
   * Many records at once (start-up), found by id at once. Sorted at the first listing or change,
   * or by sortLoaded, which start-up calls once the server listens (one sort per order instead of
   * an insertion each, and not waited for).
   */
  addAll(records: readonly ConversationRecord[]): void {
    // Loaded records mostly name the same model and endpoint: each parsed its own copy; they share one (less heap for each).
    const strings = new Map<string, string>();
    const shared = (value: string) => strings.get(value) ?? (strings.set(value, value), value);
    const firstSights: FirstSights = new Map();
    for (const record of records) {
      record.tools = this.sharedTools(record.tools);
      if (record.sandbox) record.sandbox = this.sharedSandbox(record.sandbox);
      if (record.llm) {
        record.llm.model = shared(record.llm.model);
        if (record.llm.base_url) record.llm.base_url = shared(record.llm.base_url);
      }
      this.byId.set(record.id, holdUserKeyedTogether(record, firstSights));
      if (record.quarantine) this.damaged.add(record);
    }
    shareFirstSights(firstSights);
    this.unsortedCreated = this.unsortedCreated.concat(records);
    this.unsortedUpdated = this.unsortedUpdated.concat(records);
  }

  /** The records added together, in the sorted orders. */
  sortLoaded(): void {
    this.sortLoadedByCreated();
    this.sortLoadedByUpdated();
  }

  /**
   * The records added together, in each sorted order with a turn of the event loop between (start-up,
   * once the server listens): a request that arrives meanwhile waits for one sort, not both (each
   * long enough to be felt with many conversations).
   */
  async sortLoadedInTurns(): Promise<void> {
    this.sortLoadedByCreated();
    await new Promise((resolve) => setImmediate(resolve));
    this.sortLoadedByUpdated();
  }

  private sortLoadedByCreated(): void {
    if (this.unsortedCreated.length === 0) return;
    const records = this.unsortedCreated;
    this.unsortedCreated = [];
    this.byCreated.insertAll(records);
  }

  private sortLoadedByUpdated(): void {
    if (this.unsortedUpdated.length === 0) return;
    const records = this.unsortedUpdated;
    this.unsortedUpdated = [];
    // Conversations are mostly updated in the order they were created: given in created_at order (when
    // nothing was indexed before, byCreated holds exactly these, sorted), the sort by updated_at finds them in order or in long runs.
    const createdOrder = this.byUpdated.size === 0 && this.unsortedCreated.length === 0 && this.byCreated.size === records.length;
    this.byUpdated.insertAll(createdOrder ? this.byCreated.ordered() : records);
  }

  remove(record: ConversationRecord): void {
    this.sortLoaded();
    this.byId.delete(record.id);
    this.damaged.delete(record);
    this.byCreated.remove(record);
    this.byUpdated.remove(record);
  }

  /** The record's updated_at was just changed from `old`. */
  updated(record: ConversationRecord, old: string): void {
    this.sortLoaded();
    this.byUpdated.update(record, old);
  }

  page(query: ListConversationsQuery): Page<ConversationRecord> {
    this.sortLoaded();
    const index = query.sort === 'created_at' ? this.byCreated : this.byUpdated;
    const cursor = query.pageId ? decodePageId(query.pageId, isKeyCursor) : undefined;
    const { status, owner } = query;
    const filter =
      status && owner !== undefined ? (record: ConversationRecord) => record.status === status && record.owner === owner
      : status ? (record: ConversationRecord) => record.status === status
      : owner !== undefined ? (record: ConversationRecord) => record.owner === owner
      : undefined;
    const { items, more } = index.page({ order: query.order, limit: query.limit, filter, ...(cursor ? { after: { key: cursor.k, id: cursor.i } } : {}) });
    const last = items[items.length - 1];
    return { items, next_page_id: more && last ? encodePageId({ k: query.sort === 'created_at' ? last.created_at : last.updated_at, i: last.id }) : null };
  }

  count(status?: ConversationStatus, owner?: string): number {
    if (!status && owner === undefined) return this.byId.size;
    let n = 0;
    for (const record of this.byId.values()) if ((!status || record.status === status) && (owner === undefined || record.owner === owner)) n += 1;
    return n;
  }

  countsByStatus(): Record<ConversationStatus, number> {
    const counts: Record<ConversationStatus, number> = { idle: 0, running: 0, paused: 0, waiting_for_confirmation: 0, waiting_for_input: 0, finished: 0, error: 0, stuck: 0 };
    for (const record of this.byId.values()) counts[record.status] += 1;
    return counts;
  }

  /** The shared copy of these settings, compared by their one field (SANDBOX_FIELDS: a field added to them is a compile error there). */
  private sharedSandbox(sandbox: SandboxSettings): SandboxSettings {
    let shared = this.sandboxes.get(sandbox.network);
    if (!shared) this.sandboxes.set(sandbox.network, (shared = Object.freeze({ ...sandbox })));
    return shared;
  }

  /** The shared copy of this list: most records have the one the previous record had (compared element by element, no key built). */
  private sharedTools(tools: string[]): string[] {
    const last = this.lastToolList;
    if (last && sameList(last, tools)) return last;
    const key = tools.join('\u0000');
    let shared = this.toolLists.get(key);
    if (!shared) this.toolLists.set(key, (shared = Object.freeze([...tools]) as string[]));
    return (this.lastToolList = shared);
  }
}

/** Every field of SandboxSettings: sharedSandbox compares by `network` alone. */
const SANDBOX_FIELDS: Record<keyof SandboxSettings, true> = { network: true };
void SANDBOX_FIELDS;

/** The same names in the same order. */
export function sameList(a: readonly string[], b: readonly string[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
