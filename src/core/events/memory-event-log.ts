import { randomUUID } from 'node:crypto';
import { isoTimestamp, systemClock, type Clock } from '../clock.js';
import type { DamagedDataError } from '../errors.js';
import type { AgentEvent, NewEvent } from '../schemas/event.js';
import type { AppendedEvent, EventFilter, EventLog, EventPageQuery, FirehoseEntry, StoredEvent, SubscribeFrom } from './event-log.js';
import { UNLIMITED, type EventSubscription, type SubscriptionLimits } from './event-subscription.js';
import { AppendQueue } from './append-queue.js';
import { LocalSubscriptions } from './local-subscriptions.js';

/**
 * The event log held in memory: the same contract as the file log (see the shared contract
 * tests), nothing survives the process. For tests of the core and for embedding.
 */
export class MemoryEventLog implements EventLog {
  private readonly conversations = new Map<string, StoredEvent[]>();
  private readonly firehose: { conversationId: string; stored: StoredEvent }[] = [];
  private readonly damaged = new Map<string, DamagedDataError>();
  private readonly subscriptions: LocalSubscriptions;
  private readonly clock: Clock;
  /** Appends are stored one at a time per conversation, as a store across the network would (see the contract tests). */
  private readonly queue = new AppendQueue();

  constructor(options: { clock?: Clock } = {}) {
    this.clock = options.clock ?? systemClock;
    this.subscriptions = new LocalSubscriptions({
      after: (conversationId, afterSeq, limit) => this.events(conversationId).slice(afterSeq, afterSeq + limit),
      globalAfter: (afterCursor, limit) => this.globalAfter(afterCursor, limit),
    });
  }

  append(conversationId: string, input: NewEvent): Promise<AppendedEvent> {
    return this.queue.run(conversationId, () => this.store(conversationId, input));
  }

  private store(conversationId: string, input: NewEvent): AppendedEvent {
    const events = this.events(conversationId);
    const last = events.at(-1);
    const nowMs = Math.max(this.clock.now(), last ? Date.parse(last.event.timestamp) : 0);
    const event = { id: randomUUID(), seq: events.length + 1, conversation_id: conversationId, timestamp: isoTimestamp(nowMs), ...input } as AgentEvent;
    const json = JSON.stringify(event);
    const stored = { event: JSON.parse(json) as AgentEvent, json };
    events.push(stored);
    this.conversations.set(conversationId, events);
    this.firehose.push({ conversationId, stored });
    const appended = { ...stored, globalCursor: this.firehose.length };
    this.subscriptions.publish(appended);
    return appended;
  }

  async read(conversationId: string, query: EventPageQuery): Promise<StoredEvent[]> {
    const matching = this.matching(conversationId, query);
    const ordered = query.order === 'asc' ? matching : matching.reverse();
    const cursor = query.cursorSeq;
    const afterCursor = cursor === undefined ? ordered : ordered.filter(({ event }) => (query.order === 'asc' ? event.seq > cursor : event.seq < cursor));
    return afterCursor.slice(0, query.limit);
  }

  async count(conversationId: string, filter: EventFilter): Promise<number> {
    return this.matching(conversationId, filter).length;
  }

  async findById(conversationId: string, eventId: string): Promise<StoredEvent | undefined> {
    return this.events(conversationId).find(({ event }) => event.id === eventId);
  }

  async lastSeq(conversationId: string): Promise<number> {
    return this.events(conversationId).length;
  }

  async readGlobal(afterCursor: number, limit: number): Promise<FirehoseEntry[]> {
    return this.globalAfter(afterCursor, limit);
  }

  async globalHead(): Promise<number> {
    return this.firehose.length;
  }

  subscribe(from: SubscribeFrom, limits: SubscriptionLimits = UNLIMITED): EventSubscription {
    if (from.conversationId !== null) this.events(from.conversationId);
    return this.subscriptions.subscribe(from, limits);
  }

  async drop(conversationId: string): Promise<void> {
    this.conversations.delete(conversationId);
    this.damaged.delete(conversationId);
    this.subscriptions.closeConversation(conversationId);
  }

  quarantine(conversationId: string, error: DamagedDataError): void {
    this.damaged.set(conversationId, error);
  }

  async close(): Promise<void> {}

  private events(conversationId: string): StoredEvent[] {
    const damage = this.damaged.get(conversationId);
    if (damage) throw damage;
    return this.conversations.get(conversationId) ?? [];
  }

  private matching(conversationId: string, filter: EventFilter): StoredEvent[] {
    return this.events(conversationId).filter(
      ({ event }) =>
        event.seq > (filter.afterSeq ?? 0) &&
        (!filter.kinds?.length || filter.kinds.includes(event.kind)) &&
        (!filter.sources?.length || filter.sources.includes(event.source)) &&
        (filter.sinceMs === undefined || Date.parse(event.timestamp) >= filter.sinceMs),
    );
  }

  private globalAfter(afterCursor: number, limit: number): FirehoseEntry[] {
    const out: FirehoseEntry[] = [];
    for (let index = afterCursor; index < this.firehose.length && out.length < limit; index++) {
      const entry = this.firehose[index]!;
      // Dropped and quarantined conversations are left out of the firehose.
      if (this.conversations.get(entry.conversationId)?.[entry.stored.event.seq - 1] !== entry.stored || this.damaged.has(entry.conversationId)) continue;
      out.push({ globalCursor: index + 1, stored: entry.stored });
    }
    return out;
  }
}
