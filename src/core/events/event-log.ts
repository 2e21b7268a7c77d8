import type { DamagedDataError } from '../errors.js';
import type { EventKind, EventSource, NewEvent } from '../schemas/event.js';
import type { EventSubscription, SubscriptionLimits } from './event-subscription.js';
import type { StoredEvent } from './stored-event.js';

export type { StoredEvent } from './stored-event.js';

export interface EventFilter {
  kinds?: readonly EventKind[] | undefined;
  sources?: readonly EventSource[] | undefined;
  /** Only events at or after this time (ms since epoch). */
  sinceMs?: number | undefined;
  /** Only events with seq > afterSeq. */
  afterSeq?: number | undefined;
}

export interface EventPageQuery extends EventFilter {
  order: 'asc' | 'desc';
  /** Cursor: continue after this seq (asc: seq > cursor; desc: seq < cursor). */
  cursorSeq?: number | undefined;
  limit: number;
}

export interface AppendedEvent extends StoredEvent {
  /** Position in the server-wide firehose (1, 2, 3…), the SSE `id:` of `/events/stream`. */
  globalCursor: number;
}

export interface FirehoseEntry {
  globalCursor: number;
  stored: StoredEvent;
}

/** Where a subscription starts: one conversation after a seq, or every conversation after a global cursor. */
export type SubscribeFrom = { conversationId: string; after: number } | { conversationId: null; after: number };

/**
 * The durable, append-only event log: the spine every reader (REST pages, SSE, webhooks, the
 * LLM's history) hangs off. Every call is asynchronous so that a store across the network
 * (PostgreSQL) is another implementation, not a rewrite.
 *
 * - `append` resolves with the stored event once it survives `kill -9` of the process; the log
 *   assigns the per-conversation `seq` (1, 2, 3… with no gaps, in call order per conversation),
 *   the id and the timestamp.
 * - `read` pages cost O(limit) (plus the events a filter skips), never O(total).
 * - `subscribe` yields history after the cursor, then live events, with no gap and no duplicate
 *   at the switch: each implementation owns that switch, so every reader gets it for free.
 *   A conversation's subscriptions end with a `closed` item when it is dropped.
 */
export interface EventLog {
  append(conversationId: string, event: NewEvent): Promise<AppendedEvent>;
  read(conversationId: string, query: EventPageQuery): Promise<StoredEvent[]>;
  count(conversationId: string, filter: EventFilter): Promise<number>;
  findById(conversationId: string, eventId: string): Promise<StoredEvent | undefined>;
  lastSeq(conversationId: string): Promise<number>;
  /** Firehose: events of every conversation in append order, after a global cursor. */
  readGlobal(afterCursor: number, limit: number): Promise<FirehoseEntry[]>;
  globalHead(): Promise<number>;
  subscribe(from: SubscribeFrom, limits?: SubscriptionLimits): EventSubscription;
  /** Remove a conversation's events for good; its subscriptions end. */
  drop(conversationId: string): Promise<void>;
  /** The conversation is quarantined: never open (so never repair or write) its files again; reads of it throw `error`. */
  quarantine(conversationId: string, error: DamagedDataError): void;
  /** Let go of what is held open for a conversation nobody uses now (it is reopened on the next call). */
  release?(conversationId: string): void;
  close(): Promise<void>;
}
