import type { DeltaChannel } from './delta-channel.js';
import type { AppendedEvent, EventLog } from './event-log.js';
import type { MessageDelta, NewEvent } from '../schemas/event.js';

/** Rewrites an event before it is stored (e.g. masks secret values). */
export type EventMasker = (conversationId: string, event: NewEvent) => NewEvent;

/** Masks streamed text piece by piece: `push` returns what may go out now, `flush` what it held back. */
export interface DeltaMasker {
  push(piece: string): string;
  flush(): string;
}

/**
 * The one way events come into being: mask, append to the durable log (seq assigned there, and
 * live subscribers reached by the log itself), then the readers kept in this process.
 * Streaming-only deltas are masked too, across pieces: what a delta masker holds back goes out
 * before the conversation's next event (the message or action that the text belongs to).
 */
export class EventRecorder {
  private readonly listeners = new Set<(appended: AppendedEvent) => void>();
  private deltaMaskerFor: (conversationId: string) => DeltaMasker | null = () => null;
  /** Per conversation: the masker of the text streaming now, and its last delta. */
  private readonly streaming = new Map<string, { masker: DeltaMasker; last: MessageDelta }>();

  constructor(
    private readonly log: EventLog,
    private readonly deltas: DeltaChannel,
    private masker: EventMasker = (_id, event) => event,
  ) {}

  setMasker(masker: EventMasker): void {
    this.masker = masker;
  }

  /** `factory` returns null for a conversation with nothing to mask. */
  setDeltaMasker(factory: (conversationId: string) => DeltaMasker | null): void {
    this.deltaMaskerFor = factory;
  }

  /** Called after every append (bookkeeping such as updated_at, metrics). */
  onAppend(listener: (appended: AppendedEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Masks and hands the event to the log in the call itself (the log keeps each conversation's
   * appends in call order); the readers here run once it is stored, in that same order.
   */
  async append(conversationId: string, event: NewEvent): Promise<AppendedEvent> {
    this.flushDeltas(conversationId);
    const appended = await this.log.append(conversationId, this.masker(conversationId, event));
    for (const listener of this.listeners) listener(appended);
    return appended;
  }

  /** The conversation is gone: what it was streaming is dropped. */
  closeConversation(conversationId: string): void {
    this.streaming.delete(conversationId);
  }

  /** Streaming-only text; never stored. */
  delta(delta: MessageDelta): void {
    let stream = this.streaming.get(delta.conversation_id);
    if (!stream) {
      const masker = this.deltaMaskerFor(delta.conversation_id);
      if (!masker) return this.publishDelta(delta);
      stream = { masker, last: delta };
      this.streaming.set(delta.conversation_id, stream);
    }
    stream.last = delta;
    this.publishDelta({ ...delta, content_delta: stream.masker.push(delta.content_delta) });
  }

  private flushDeltas(conversationId: string): void {
    const stream = this.streaming.get(conversationId);
    if (!stream) return;
    this.streaming.delete(conversationId);
    this.publishDelta({ ...stream.last, content_delta: stream.masker.flush() });
  }

  private publishDelta(delta: MessageDelta): void {
    if (delta.content_delta !== '') this.deltas.publish(delta);
  }
}
