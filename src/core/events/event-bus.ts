import type { AppendedEvent } from './event-log.js';
import type { MessageDelta } from '../schemas/event.js';

export type BusMessage =
  | { type: 'event'; appended: AppendedEvent }
  | { type: 'delta'; delta: MessageDelta }
  /** The conversation is gone (deleted): its streams end. */
  | { type: 'closed'; conversationId: string };

export type BusListener = (message: BusMessage) => void;

/**
 * In-process fan-out of what was just appended to the log (and of streaming-only deltas).
 * Publishing is synchronous and never waits for a subscriber: each subscriber buffers on its
 * own and drops out when it cannot keep up (see event-stream.ts).
 */
export class EventBus {
  private readonly byConversation = new Map<string, Set<BusListener>>();
  private readonly everyConversation = new Set<BusListener>();

  /** `conversationId` null subscribes to every conversation (the firehose). */
  subscribe(conversationId: string | null, listener: BusListener): () => void {
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

  publish(message: BusMessage): void {
    const conversationId = message.type === 'event' ? message.appended.event.conversation_id : message.type === 'delta' ? message.delta.conversation_id : message.conversationId;
    const listeners = this.byConversation.get(conversationId);
    if (listeners) for (const listener of [...listeners]) listener(message);
    for (const listener of [...this.everyConversation]) listener(message);
  }

  get subscriberCount(): number {
    let n = this.everyConversation.size;
    for (const listeners of this.byConversation.values()) n += listeners.size;
    return n;
  }
}
