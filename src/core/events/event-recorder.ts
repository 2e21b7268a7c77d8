import type { DeltaChannel } from './delta-channel.js';
import type { AppendedEvent, EventLog } from './event-log.js';
import type { NewEvent, StreamDelta } from '../schemas/event.js';

/** Rewrites an event before it is stored (e.g. masks secret values). */
export type EventMasker = (conversationId: string, event: NewEvent) => NewEvent;

/** Masks streamed text piece by piece: `push` returns what may go out now, `flush` what it held back. */
export interface DeltaMasker {
  push(piece: string): string;
  flush(): string;
}

/**
 * A reader of the log kept in this process: it sees every stored event once, in each
 * conversation's seq order, right after the append that stored it. The readers are named and
 * listed in one place (the composition root): the conversation summary, the LLM history fold,
 * metrics. Readers that need no answer in the same tick (webhooks, SSE) subscribe to the log.
 */
export interface EventReader {
  readonly name: string;
  read(appended: AppendedEvent): void;
}

export interface EventRecorderDeps {
  log: EventLog;
  deltas: DeltaChannel;
  /** Rewrites each event before it is stored (masks secret values); none: stored as given. */
  mask?: EventMasker;
  /** The masker of a conversation's streamed text; null for a conversation with nothing to mask. */
  deltaMasker?: (conversationId: string) => DeltaMasker | null;
  readers?: readonly EventReader[];
}

/**
 * The one way events come into being: mask, append to the durable log (seq assigned there, and
 * live subscribers reached by the log itself), then the readers kept in this process.
 * Streaming-only deltas are masked too, across pieces: what a delta masker holds back goes out
 * before the conversation's next event (the message or action that the text belongs to).
 */
export class EventRecorder {
  /** Per conversation: the masker of the text streaming now, and its last delta. */
  private readonly streaming = new Map<string, { masker: DeltaMasker; last: StreamDelta }>();

  constructor(private readonly deps: EventRecorderDeps) {}

  /** The in-process readers, in the order they read. */
  get readers(): readonly EventReader[] {
    return this.deps.readers ?? [];
  }

  /**
   * Masks and hands the event to the log in the call itself (the log keeps each conversation's
   * appends in call order); the readers here run once it is stored, in that same order.
   */
  async append(conversationId: string, event: NewEvent): Promise<AppendedEvent> {
    this.flushDeltas(conversationId);
    const appended = await this.deps.log.append(conversationId, this.deps.mask ? this.deps.mask(conversationId, event) : event);
    for (const reader of this.readers) reader.read(appended);
    return appended;
  }

  /** The conversation is gone: what it was streaming is dropped. */
  closeConversation(conversationId: string): void {
    this.streaming.delete(conversationId);
  }

  /** Streaming-only text; never stored. Reasoning then answer: what the reasoning's masker held goes out first. */
  delta(delta: StreamDelta): void {
    let stream = this.streaming.get(delta.conversation_id);
    if (stream && stream.last.kind !== delta.kind) {
      this.flushDeltas(delta.conversation_id);
      stream = undefined;
    }
    if (!stream) {
      const masker = this.deps.deltaMasker?.(delta.conversation_id) ?? null;
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

  private publishDelta(delta: StreamDelta): void {
    if (delta.content_delta !== '') this.deps.deltas.publish(delta);
  }
}
