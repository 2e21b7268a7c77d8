import type { StreamDelta } from '../schemas/event.js';

export type DeltaListener = (delta: StreamDelta) => void;

/**
 * Streaming-only `message_delta` and `reasoning_delta` text, beside the log: never stored, so it has no cursor and is
 * only seen by subscribers that are live when it is published. Publishing is synchronous and
 * never waits for a subscriber.
 */
export class DeltaChannel {
  private readonly byConversation = new Map<string, Set<DeltaListener>>();
  private readonly everyConversation = new Set<DeltaListener>();

  /** `conversationId` null listens to every conversation (the firehose). */
  subscribe(conversationId: string | null, listener: DeltaListener): () => void {
    if (conversationId === null) {
      this.everyConversation.add(listener);
      return () => this.everyConversation.delete(listener);
    }
    let listeners = this.byConversation.get(conversationId);
    if (!listeners) {
      listeners = new Set();
      this.byConversation.set(conversationId, listeners);
    }
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.byConversation.get(conversationId) === listeners) this.byConversation.delete(conversationId);
    };
  }

  publish(delta: StreamDelta): void {
    const listeners = this.byConversation.get(delta.conversation_id);
    if (listeners) for (const listener of [...listeners]) listener(delta);
    for (const listener of [...this.everyConversation]) listener(delta);
  }
}
