import type { AppendedEvent, StoredEvent, SubscribeFrom } from './event-log.js';
import { QueuedSubscription, type EventSubscription, type LogEntry, type SubscriptionLimits } from './event-subscription.js';
import { Subscribers } from './subscribers.js';

/** What an in-process log can read at once (synchronously), for the switch from history to live. */
export interface LocalReader {
  /** Events of one conversation after a seq, ascending. */
  after(conversationId: string, afterSeq: number, limit: number): StoredEvent[];
  /** Events of every conversation after a global cursor, in append order. */
  globalAfter(afterCursor: number, limit: number): { globalCursor: number; stored: StoredEvent }[];
}

/**
 * Subscriptions of a log that lives in this process (the file log, the in-memory log): appends
 * are stored before `publish` is called, in the same synchronous step, and a subscription listens
 * from the moment it exists, so the tail read at the switch and the live items meet with no gap. A log across the network (PostgreSQL) owns a different switch.
 */
export class LocalSubscriptions {
  private readonly subscribers = new Subscribers();

  constructor(private readonly reader: LocalReader) {}

  subscribe(from: SubscribeFrom, limits: SubscriptionLimits): EventSubscription<never> {
    const { conversationId } = from;
    const read = (after: number, limit: number): LogEntry[] =>
      conversationId === null
        ? this.reader.globalAfter(after, limit).map(({ globalCursor, stored }) => ({ cursor: globalCursor, stored }))
        : this.reader.after(conversationId, after, limit).map((stored) => ({ cursor: stored.event.seq, stored }));
    let release = () => {};
    const subscription = new QueuedSubscription(
      {
        page: async (after, limit) => read(after, limit),
        // Read in the same synchronous step as the call: no append can come between it and the live items.
        tail: async (after) => {
          const tail: LogEntry[] = [];
          for (;;) {
            const more = read(tail.at(-1)?.cursor ?? after, 10_000);
            if (more.length === 0) return tail;
            tail.push(...more);
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

  /** Called right after an event is stored, before anything else can append. */
  publish(appended: AppendedEvent): void {
    this.subscribers.publish(appended, appended.globalCursor);
  }

  /** The conversation is gone: its subscriptions end. */
  closeConversation(conversationId: string): void {
    this.subscribers.closeConversation(conversationId);
  }

  get size(): number {
    return this.subscribers.size;
  }
}
