import type { StoredEvent } from './event-log.js';
import type { SubscriptionItem } from './event-subscription.js';

export type Push = (item: SubscriptionItem) => void;

/**
 * The live ends of a log's subscriptions, by conversation and for the firehose: every log
 * (in-process or across the network) hands each stored event to them the same way.
 */
export class Subscribers {
  private readonly byConversation = new Map<string, Set<Push>>();
  private readonly everyConversation = new Set<Push>();

  /** `conversationId` null: the firehose. Returns the unsubscribe. */
  listen(conversationId: string | null, push: Push): () => void {
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

  /** A stored event: its conversation's subscribers get it at its seq, the firehose's at `globalCursor`. */
  publish(stored: StoredEvent, globalCursor: number): void {
    const listeners = this.byConversation.get(stored.event.conversation_id);
    // No copy of the sets per event: a push only ever removes listeners (a subscription that
    // overflows ends), which a Set's iteration allows; one added meanwhile would get the event too.
    if (listeners) {
      const item: SubscriptionItem = { type: 'event', cursor: stored.event.seq, stored };
      for (const push of listeners) push(item);
    }
    if (this.everyConversation.size > 0) {
      const item: SubscriptionItem = { type: 'event', cursor: globalCursor, stored };
      for (const push of this.everyConversation) push(item);
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
}
