import type { DamagedDataError } from '../errors.js';
import type { AgentEvent, EventKind, EventSource, NewEvent } from '../schemas/event.js';

/** An event as stored: the parsed value and the exact JSON line it was written as. */
export interface StoredEvent {
  event: AgentEvent;
  json: string;
}

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

/**
 * The durable, append-only event log. `append` returns once the event is in the operating
 * system's hands (it survives `kill -9` of the process), and assigns the per-conversation `seq`
 * (1, 2, 3… with no gaps), the id and the timestamp. Calls are synchronous so that ordering is
 * trivially total within the process: whoever sees an event sees every earlier one first.
 * Reads of a page cost O(limit) (plus the events a filter skips), never O(total).
 */
export interface EventLog {
  append(conversationId: string, event: NewEvent): AppendedEvent;
  read(conversationId: string, query: EventPageQuery): StoredEvent[];
  count(conversationId: string, filter: EventFilter): number;
  findById(conversationId: string, eventId: string): StoredEvent | undefined;
  lastSeq(conversationId: string): number;
  /** Firehose: events of every conversation in append order, after a global cursor. */
  readGlobal(afterCursor: number, limit: number): FirehoseEntry[];
  globalHead(): number;
  /** Remove a conversation's events for good. */
  drop(conversationId: string): void;
  /** The conversation is quarantined: never open (so never repair or write) its files again; reads of it throw `error`. */
  quarantine(conversationId: string, error: DamagedDataError): void;
  close(): void;
}
