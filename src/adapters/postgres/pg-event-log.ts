/**
 * The event log on PostgreSQL: the async `EventLog` port over PgEventStore, with live
 * subscriptions fed by this instance's GlobalTail (the firehose of every instance, in commit
 * order, woken by NATS JetStream or LISTEN/NOTIFY and polled as a fallback).
 *
 * The switch from history to live has no gap and no duplicate: a subscription listens to the
 * tail from the moment it exists; the tail delivers every committed event after its position,
 * and anything committed before the listener was added is in the database, which the history
 * pages and the tail read at the switch come from. QueuedSubscription merges the two by cursor.
 *
 * Appends are queued per conversation in this process (call order = seq order) and, when a
 * fence is given for the conversation, refused once another instance holds its lease.
 */
import { asDatabaseUnavailable } from './connection-errors.js';
import type { Sql } from 'postgres';
import type { Clock } from '../../core/clock.js';
import type { DamagedDataError } from '../../core/errors.js';
import { AppendQueue } from '../../core/events/append-queue.js';
import type { AppendedEvent, EventFilter, EventLog, EventPageQuery, FirehoseEntry, StoredEvent, SubscribeFrom } from '../../core/events/event-log.js';
import { QueuedSubscription, UNLIMITED, type EventSubscription, type LogEntry, type SubscriptionLimits } from '../../core/events/event-subscription.js';
import type { NewEvent } from '../../core/schemas/event.js';
import type { EventFeed } from '../cluster/event-feed.js';
import { GlobalTail } from '../cluster/global-tail.js';
import { Subscribers } from '../../core/events/subscribers.js';
import { PgEventStore, type Fence } from './pg-event-store.js';


export interface PgEventLogOptions {
  sql: Sql;
  /** Cross-instance wake-ups (NATS or LISTEN/NOTIFY); null: this instance polls only. */
  feed: EventFeed | null;
  clock?: Clock;
  /** The lease a conversation's appends are made under (none: unfenced). */
  fenceOf?: (conversationId: string) => Fence | undefined | Promise<Fence>;
  /** How often the tail reads the database when no notice came (ms). */
  pollMs?: number;
  onError?: (error: unknown) => void;
}

export class PgEventLog implements EventLog {
  readonly store: PgEventStore;
  readonly tail: GlobalTail;
  private readonly queue = new AppendQueue();
  private readonly subscribers = new Subscribers();
  private readonly damaged = new Map<string, DamagedDataError>();
  /** Appends made by this instance, and feed publications that failed (for /metrics). */
  readonly stats = { appended: 0, publishFailures: 0 };

  private constructor(private readonly options: PgEventLogOptions) {
    this.store = new PgEventStore(options.sql, options.clock ? { clock: options.clock } : {});
    this.tail = new GlobalTail(this.store, options.feed, { pollMs: options.pollMs ?? 1000, onError: options.onError });
    this.tail.onEntry((entry) => this.subscribers.publish(entry.stored, entry.globalCursor));
  }

  /** Opens the log: its tail starts at the current firehose head and listens to the feed. */
  static async open(options: PgEventLogOptions): Promise<PgEventLog> {
    const log = new PgEventLog(options);
    await log.tail.start();
    return log;
  }

  get feedName(): 'nats' | 'postgres' | null {
    return this.options.feed?.name ?? null;
  }

  append(conversationId: string, input: NewEvent): Promise<AppendedEvent> {
    this.check(conversationId);
    return this.queue.run(conversationId, async () => {
      // A database that does not answer is said so (a 503 to the client, a paused run), not an internal error.
      const appended = await (async () => this.store.append(conversationId, input, await this.options.fenceOf?.(conversationId)))().catch((error: unknown) => {
        throw asDatabaseUnavailable(error) ?? error;
      });
      this.stats.appended++;
      const notice = { globalCursor: appended.globalCursor, conversationId, seq: appended.event.seq, json: appended.json };
      // This instance's own subscribers need no round trip through the feed.
      void this.tail.notice(notice);
      this.options.feed?.publish(notice).catch((error: unknown) => {
        this.stats.publishFailures++;
        this.options.onError?.(error);
      });
      return appended;
    });
  }

  async read(conversationId: string, query: EventPageQuery): Promise<StoredEvent[]> {
    this.check(conversationId);
    return this.store.read(conversationId, query);
  }

  async count(conversationId: string, filter: EventFilter): Promise<number> {
    this.check(conversationId);
    return this.store.count(conversationId, filter);
  }

  async findById(conversationId: string, eventId: string): Promise<StoredEvent | undefined> {
    this.check(conversationId);
    return this.store.findById(conversationId, eventId);
  }

  async lastSeq(conversationId: string): Promise<number> {
    this.check(conversationId);
    return this.store.lastSeq(conversationId);
  }

  async readGlobal(afterCursor: number, limit: number): Promise<FirehoseEntry[]> {
    return this.store.readGlobal(afterCursor, limit);
  }

  async globalHead(): Promise<number> {
    return this.store.globalHead();
  }

  subscribe(from: SubscribeFrom, limits: SubscriptionLimits = UNLIMITED): EventSubscription {
    const { conversationId } = from;
    if (conversationId !== null) this.check(conversationId);
    const read = async (after: number, limit: number): Promise<LogEntry[]> =>
      conversationId === null
        ? (await this.store.readGlobal(after, limit)).map(({ globalCursor, stored }) => ({ cursor: globalCursor, stored }))
        : (await this.store.read(conversationId, { order: 'asc', cursorSeq: after, limit })).map((stored) => ({ cursor: stored.event.seq, stored }));
    let release = () => {};
    const subscription = new QueuedSubscription(
      {
        page: read,
        tail: async (after) => {
          const tail: LogEntry[] = [];
          for (;;) {
            const more = await read(tail.at(-1)?.cursor ?? after, 1000);
            tail.push(...more);
            if (more.length < 1000) return tail;
          }
        },
        release: () => release(),
      },
      from.after,
      limits,
    );
    release = this.subscribers.listen(conversationId, (item) => subscription.receive(item));
    return subscription;
  }

  async drop(conversationId: string): Promise<void> {
    await this.store.drop(conversationId);
    this.damaged.delete(conversationId);
    this.closeConversation(conversationId);
  }

  /** A conversation was dropped by another instance: its subscriptions here end too. */
  closeConversation(conversationId: string): void {
    this.subscribers.closeConversation(conversationId);
  }

  quarantine(conversationId: string, error: DamagedDataError): void {
    this.damaged.set(conversationId, error);
  }

  /** The conversation's record was repaired in the database (another instance reads it again): served again. */
  lift(conversationId: string): void {
    this.damaged.delete(conversationId);
  }

  /** Subscribers on this instance (for /metrics). */
  get size(): number {
    return this.subscribers.size;
  }

  async close(): Promise<void> {
    await this.tail.close();
    await this.options.feed?.close().catch(() => {});
  }

  private check(conversationId: string): void {
    const damage = this.damaged.get(conversationId);
    if (damage) throw damage;
  }
}
