import type { EventBus } from './event-bus.js';
import type { AppendedEvent, EventLog } from './event-log.js';
import type { MessageDelta, NewEvent } from '../schemas/event.js';

/** Rewrites an event before it is stored (e.g. masks secret values). */
export type EventMasker = (conversationId: string, event: NewEvent) => NewEvent;

/**
 * The one way events come into being: mask, append to the durable log (seq assigned there),
 * then fan out. Whoever sees an event (HTTP, SSE, webhooks) sees it after it is on disk.
 */
export class EventRecorder {
  private readonly listeners = new Set<(appended: AppendedEvent) => void>();

  constructor(
    private readonly log: EventLog,
    private readonly bus: EventBus,
    private masker: EventMasker = (_id, event) => event,
  ) {}

  setMasker(masker: EventMasker): void {
    this.masker = masker;
  }

  /** Called after every append, before the bus fan-out (bookkeeping such as updated_at, metrics). */
  onAppend(listener: (appended: AppendedEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  append(conversationId: string, event: NewEvent): AppendedEvent {
    const appended = this.log.append(conversationId, this.masker(conversationId, event));
    for (const listener of this.listeners) listener(appended);
    this.bus.publish({ type: 'event', appended });
    return appended;
  }

  /** The conversation is gone: its streams end. */
  closeConversation(conversationId: string): void {
    this.bus.publish({ type: 'closed', conversationId });
  }

  /** Streaming-only text; never stored. */
  delta(delta: MessageDelta): void {
    this.bus.publish({ type: 'delta', delta });
  }
}
