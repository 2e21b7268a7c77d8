/**
 * This instance's view of the conversations other instances run. Requests about one
 * conversation go to its owner (forwarding.ts) or to the shared log; what spans conversations
 * (the list, the counts by status) is served from this view, which follows the database:
 * - a record another instance writes or removes is read again (LISTEN/NOTIFY on agentd_records),
 *   its damage included: a row that no longer reads is quarantined here as at start-up;
 * - each event of theirs (this instance's tail of the shared log) moves the conversation's
 *   event count and updated_at, as local appends move them through the summary reader.
 * `settled()` is the read barrier: once it resolves, every change committed before the call is
 * in the view, so a list asked of this instance right after another answered a change shows it.
 */
import { randomUUID } from 'node:crypto';
import type { PostgresStorage } from '../storage/index.js';
import { isoTimestamp } from '../../core/clock.js';
import type { ConversationRecord } from '../../core/conversations/conversation-record.js';
import type { ConversationStore } from '../../core/conversations/conversation-store.js';
import { placeholderRecord } from '../../core/conversations/placeholder-record.js';
import type { ConversationSummary } from '../../core/conversations/summary-store.js';
import { DamagedDataError } from '../../core/errors.js';

const MARK = 'mark:';

export type StoredRecord = { record: ConversationRecord | undefined; summary: ConversationSummary } | { damaged: DamagedDataError };

export class Replica {
  /** Record reads, one after another in notification order. */
  private chain: Promise<void> = Promise.resolve();
  private readonly marks = new Map<string, () => void>();
  /** Barriers that gave up waiting, and full reads after the listening connection was lost (for /metrics). */
  readonly stats = { barrierTimeouts: 0, resyncs: 0 };

  constructor(
    private readonly deps: {
      pg: PostgresStorage;
      store: ConversationStore;
      /** Whether this instance runs the conversation (its own view is the truth then). */
      holds: (conversationId: string) => boolean;
      onError: (error: unknown) => void;
    },
  ) {}

  async start(): Promise<void> {
    const { pg, store, holds } = this.deps;
    await pg.repository.onChange(
      (payload) => this.onNotice(payload),
      () => this.enqueue(() => this.resync()),
    );
    pg.log.tail.onEntry(({ stored }) => {
      if (!holds(stored.event.conversation_id)) store.follow(stored.event);
    });
  }

  /** Resolves once every record change and event committed before the call is in this view (or after `timeoutMs`: served as it is). */
  async settled(timeoutMs = 2000): Promise<void> {
    const mark = `${MARK}${randomUUID()}`;
    const seen = new Promise<void>((resolve) => this.marks.set(mark, resolve));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), timeoutMs)));
    try {
      const caughtUp = Promise.all([this.deps.pg.repository.mark(mark).then(() => seen), this.deps.pg.log.tail.poke()]);
      if ((await Promise.race([caughtUp, late])) === 'late') this.stats.barrierTimeouts++;
    } catch (error) {
      this.deps.onError(error);
    } finally {
      clearTimeout(timer);
      this.marks.delete(mark);
    }
  }

  /** A conversation's record as stored now, with its summary from the log; or the damage that keeps it from being read. */
  async read(id: string): Promise<StoredRecord> {
    const { pg } = this.deps;
    let record: ConversationRecord | undefined;
    try {
      record = await pg.repository.load(id);
    } catch (error) {
      if (error instanceof DamagedDataError) return { damaged: error };
      throw error;
    }
    const [last] = record ? await pg.log.store.read(id, { order: 'desc', limit: 1 }) : [];
    return { record, summary: { event_count: last?.event.seq ?? 0, updated_at: last?.event.timestamp ?? '' } };
  }

  /** Puts what `read` found in this instance's view. */
  apply(id: string, stored: StoredRecord): void {
    const { pg, store } = this.deps;
    if ('damaged' in stored) {
      store.sync(id, placeholderRecord({ id, damage: stored.damaged.damage, now: isoTimestamp(Date.now()) }));
      pg.log.quarantine(id, stored.damaged);
      return;
    }
    pg.log.lift(id);
    store.sync(id, stored.record, stored.summary);
    // Deleted on its holder: the SSE streams of it served here end as they do there.
    if (!stored.record) pg.log.closeConversation(id);
  }

  private onNotice(payload: string): void {
    if (payload.startsWith(MARK)) {
      const mark = this.marks.get(payload);
      if (mark) void this.chain.then(mark);
      return;
    }
    this.enqueue(() => this.refresh(payload));
  }

  private enqueue(work: () => Promise<void>): void {
    this.chain = this.chain.then(work).catch(this.deps.onError);
  }

  /** The listening connection was lost and made again: changes sent meanwhile were missed, so every record is read again. */
  private async resync(): Promise<void> {
    const { pg, store, holds } = this.deps;
    this.stats.resyncs++;
    const { records, damaged } = await pg.repository.loadAll();
    const stored = new Set<string>();
    for (const record of records) {
      stored.add(record.id);
      if (holds(record.id)) continue;
      const [last] = await pg.log.store.read(record.id, { order: 'desc', limit: 1 });
      if (!holds(record.id)) this.apply(record.id, { record, summary: { event_count: last?.event.seq ?? 0, updated_at: last?.event.timestamp ?? '' } });
    }
    for (const { id, error } of damaged) {
      stored.add(id);
      if (!holds(id)) this.apply(id, { damaged: error });
    }
    for (const { id } of [...store.all(), ...store.quarantined()]) if (!stored.has(id) && !holds(id)) this.apply(id, { record: undefined, summary: { event_count: 0, updated_at: '' } });
  }

  /** Another instance wrote (or removed) this record: follow it, unless it runs here. */
  private async refresh(id: string): Promise<void> {
    if (this.deps.holds(id)) return;
    const stored = await this.read(id);
    if (!this.deps.holds(id)) this.apply(id, stored);
  }
}
