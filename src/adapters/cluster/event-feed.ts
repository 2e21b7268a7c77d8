/**
 * How instances tell each other that events were appended: a doorbell, not the record. The
 * record is the database; a feed only says "position N (and maybe its JSON) was committed", so
 * a lost, late or reordered notification costs a read, never an event (see GlobalTail).
 */
export interface FeedNotice {
  globalCursor: number;
  conversationId: string;
  seq: number;
  /** The event's JSON when it fits the feed's message size; absent means "read it". */
  json?: string;
}

export interface EventFeed {
  readonly name: 'nats' | 'postgres';
  /** Announces a committed append. Failures are logged by the caller, never fatal: the tail polls. */
  publish(notice: FeedNotice): Promise<void>;
  /** Calls `listener` for every notice from any instance (this one included). */
  listen(listener: (notice: FeedNotice) => void): Promise<void>;
  /** Checks the feed answers (for /health); absent when it rides on the database. */
  ping?(): Promise<void>;
  close(): Promise<void>;
}
