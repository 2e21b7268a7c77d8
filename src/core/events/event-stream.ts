import type { z } from 'zod';
import type { StreamClosedNotice, StreamDelta, StreamOverflowNotice } from '../schemas/event.js';
import type { DeltaChannel } from './delta-channel.js';
import type { EventLog, StoredEvent } from './event-log.js';
import type { EventSubscription, SubscriptionItem, SubscriptionLimits } from './event-subscription.js';

/** One item of an SSE stream: `id` (the cursor) is absent for streaming-only deltas and notices. */
export interface StreamItem {
  id?: string;
  event: string;
  data: string;
  /** The item as SSE text (`id:`, `event:`, `data:` lines and a blank line). */
  frame: string;
}

/**
 * Live items are encoded once per event and shared by every subscriber: one frame per stream
 * kind (a conversation's streams carry seq, the firehose the global cursor), keyed by the stored
 * event the log hands to every subscriber.
 */
const conversationFrames = new WeakMap<object, StreamItem>();
const firehoseFrames = new WeakMap<object, StreamItem>();
const deltaFrames = new WeakMap<object, StreamItem>();

export interface EventStreamOptions extends SubscriptionLimits {
  log: EventLog;
  deltas: DeltaChannel;
  /** null: the firehose over every conversation, with the global cursor as `id`. */
  conversationId: string | null;
  /** Start after this cursor (seq, or global cursor for the firehose). */
  afterCursor: number;
  includeDeltas: boolean;
  /** Only the events of conversations this accepts (the firehose of a key that sees its owner's conversations only). */
  visible?: ((conversationId: string) => boolean) | undefined;
}

/**
 * An SSE stream: the log's subscription (history, then live, with no gap and no duplicate: the
 * log owns that switch) with streaming-only deltas woven in once it is live, encoded as frames.
 */
export class EventStream implements AsyncIterable<StreamItem> {
  private readonly subscription: EventSubscription<StreamDelta>;
  private readonly stopDeltas: () => void;
  private ended = false;
  private endNotice: StreamItem | null = null;
  private endListeners: (() => void)[] = [];

  constructor(private readonly options: EventStreamOptions) {
    const { log, conversationId, afterCursor, visible } = options;
    this.subscription = log.subscribe({ conversationId, after: afterCursor } as Parameters<EventLog['subscribe']>[0], options) as unknown as EventSubscription<StreamDelta>;
    this.stopDeltas = options.includeDeltas
      ? options.deltas.subscribe(conversationId, (delta) => {
          if (!visible || visible(delta.conversation_id)) this.subscription.interleave(delta, JSON.stringify(delta).length);
        })
      : () => undefined;
    // Overflow or deletion ends the stream now, even if its writer is stalled: its last items still go out.
    this.subscription.onClose(() => this.close());
  }

  /** End the stream (client gone, conversation deleted, server closing). */
  close(notice?: StreamItem): void {
    if (this.ended) return;
    this.ended = true;
    this.endNotice = notice ?? null;
    this.stopDeltas();
    this.subscription.close();
    for (const listener of this.endListeners.splice(0)) listener();
  }

  get closed(): boolean {
    return this.ended;
  }

  /** Caught up with the log: new events reach this stream as they are stored. */
  get live(): boolean {
    return this.subscription.live;
  }

  /** Called once when the stream ends, for whatever reason (at once if it already has). */
  onEnd(listener: () => void): void {
    if (this.ended) listener();
    else this.endListeners.push(listener);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<StreamItem> {
    for await (const batch of this.batches()) yield* batch;
  }

  /**
   * The stream in batches: history a page at a time, then everything queued since the last
   * batch was taken. A writer sends each batch in one write; its bytes stop counting against
   * the subscriber's cap when the writer asks for the next one.
   */
  async *batches(): AsyncGenerator<StreamItem[]> {
    try {
      const visible = this.options.visible;
      for await (const batch of this.subscription.batches()) {
        const items = visible ? batch.filter((item) => visibleItem(item, visible)) : batch;
        if (items.length > 0) yield items.map((item) => this.toItem(item));
      }
      if (this.endNotice) yield [this.endNotice];
    } finally {
      this.close();
    }
  }

  private toItem(item: SubscriptionItem<StreamDelta>): StreamItem {
    switch (item.type) {
      case 'event': {
        const frames = this.options.conversationId === null ? firehoseFrames : conversationFrames;
        return shared(frames, item.stored, () => eventItem(item.cursor, item.stored));
      }
      case 'side':
        return shared(deltaFrames, item.value, () => noticeItem(item.value.kind, item.value));
      case 'closed': {
        const notice: z.infer<typeof StreamClosedNotice> = { reason: 'conversation_deleted', conversation_id: item.conversationId };
        return noticeItem('stream_closed', notice);
      }
      case 'overflow': {
        const notice: z.infer<typeof StreamOverflowNotice> = { reason: 'subscriber_too_slow', resume_after: String(item.resumeAfter) };
        return noticeItem('stream_overflow', notice);
      }
    }
  }
}

function visibleItem(item: SubscriptionItem<StreamDelta>, visible: (conversationId: string) => boolean): boolean {
  if (item.type === 'event') return visible(item.stored.event.conversation_id);
  if (item.type === 'closed') return visible(item.conversationId);
  if (item.type === 'side') return visible(item.value.conversation_id);
  return true;
}

function eventItem(cursor: number, stored: StoredEvent): StreamItem {
  const id = String(cursor);
  return { id, event: stored.event.kind, data: stored.json, frame: `id: ${id}\nevent: ${stored.event.kind}\ndata: ${stored.json}\n\n` };
}

/** An item without a cursor (a delta or a notice); its JSON has no line break, so one data line. */
export function noticeItem(event: string, body: unknown): StreamItem {
  const data = JSON.stringify(body);
  return { event, data, frame: `event: ${event}\ndata: ${data}\n\n` };
}

function shared(frames: WeakMap<object, StreamItem>, key: object, make: () => StreamItem): StreamItem {
  let item = frames.get(key);
  if (!item) {
    item = make();
    frames.set(key, item);
  }
  return item;
}
