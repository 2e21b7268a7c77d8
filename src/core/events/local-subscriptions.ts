import type { AppendedEvent, StoredEvent, SubscribeFrom } from './event-log.js';
import { QueuedSubscription, type EventSubscription, type LogEntry, type SubscriptionItem, type SubscriptionLimits } from './event-subscription.js';

type Push = (item: SubscriptionItem) => void;

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
  private readonly byConversation = new Map<string, Set<Push>>();
  private readonly everyConversation = new Set<Push>();

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
    release = this.listen(conversationId, (item) => subscription.receive(item));
    return subscription;
  }

  /** Called right after an event is stored, before anything else can append. */
  publish(appended: AppendedEvent): void {
    const listeners = this.byConversation.get(appended.event.conversation_id);
    if (listeners) {
      const item: SubscriptionItem = { type: 'event', cursor: appended.event.seq, stored: appended };
      for (const push of [...listeners]) push(item);
    }
    if (this.everyConversation.size > 0) {
      const item: SubscriptionItem = { type: 'event', cursor: appended.globalCursor, stored: appended };
      for (const push of [...this.everyConversation]) push(item);
    }
  }

  /** The conversation is gone: its subscriptions end. */
  closeConversation(conversationId: string): void {
    const listeners = this.byConversation.get(conversationId);
    if (!listeners) return;
    this.byConversation.delete(conversationId);
    for (const push of [...listeners]) push({ type: 'closed', conversationId });
  }

  get size(): number {
    let n = this.everyConversation.size;
    for (const listeners of this.byConversation.values()) n += listeners.size;
    return n;
  }

  private listen(conversationId: string | null, push: Push): () => void {
    if (conversationId === null) {
      this.everyConversation.add(push);
      return () => this.everyConversation.delete(push);
    }
    let listeners = this.byConversation.get(conversationId);
    if (!listeners) {
      listeners = new Set();
      this.byConversation.set(conversationId, listeners);
    }
    listeners.add(push);
    return () => {
      listeners.delete(push);
      if (listeners.size === 0 && this.byConversation.get(conversationId) === listeners) this.byConversation.delete(conversationId);
    };
  }
}
