import type { z } from 'zod';
import type { StreamClosedNotice, StreamOverflowNotice } from '../schemas/event.js';
import type { EventBus, BusMessage } from './event-bus.js';
import type { EventLog, StoredEvent } from './event-log.js';

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
 * kind (a conversation's streams carry seq, the firehose the global cursor), keyed by the bus
 * message every subscriber receives.
 */
const conversationFrames = new WeakMap<object, StreamItem>();
const firehoseFrames = new WeakMap<object, StreamItem>();

export interface EventStreamOptions {
  log: EventLog;
  bus: EventBus;
  /** null: the firehose over every conversation, with the global cursor as `id`. */
  conversationId: string | null;
  /** Start after this cursor (seq, or global cursor for the firehose). */
  afterCursor: number;
  /** Live events buffered for a subscriber that does not keep up; past it the stream ends. */
  maxBuffered: number;
  /** The same cap in bytes (a few large events can hold more memory than many small ones). */
  maxBufferedBytes: number;
  includeDeltas: boolean;
  historyPageSize?: number;
}

/**
 * History first, then live, with no gap and no duplicate across the switch: history is read
 * from the log in pages; then, in one synchronous step, the stream subscribes to the bus and
 * reads what was appended since the last page. Appends are synchronous too, so every later
 * event reaches the subscription and nothing in between is missed. Live events carry their
 * cursor and anything at or below the last one sent is skipped.
 */
export class EventStream implements AsyncIterable<StreamItem> {
  private queue: StreamItem[] = [];
  /** Bytes of `data` in the queue and in the batch being written: what a slow subscriber holds. */
  private bufferedBytes = 0;
  private wake: (() => void) | null = null;
  private unsubscribe: (() => void) | null = null;
  private ended = false;
  private endNotice: StreamItem | null = null;
  private endListeners: (() => void)[] = [];
  private cursor: number;

  constructor(private readonly options: EventStreamOptions) {
    this.cursor = options.afterCursor;
  }

  /** End the stream (client gone, conversation deleted, server closing). */
  close(notice?: StreamItem): void {
    if (this.ended) return;
    this.ended = true;
    this.endNotice = notice ?? null;
    this.unsubscribe?.();
    this.wake?.();
    for (const listener of this.endListeners.splice(0)) listener();
  }

  get closed(): boolean {
    return this.ended;
  }

  /** Called once when the stream ends, for whatever reason (at once if it already has). */
  onEnd(listener: () => void): void {
    if (this.ended) listener();
    else this.endListeners.push(listener);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<StreamItem> {
    for await (const batch of this.batches()) {
      for (const item of batch) yield item;
    }
  }

  /**
   * The stream in batches: history a page at a time, then everything queued since the last
   * batch was taken. A writer sends each batch in one write; its bytes stop counting against
   * the subscriber's cap when the writer asks for the next one.
   */
  async *batches(): AsyncGenerator<StreamItem[]> {
    try {
      for (const page of this.history()) yield page;
      if (this.ended) return;
      this.subscribe();
      while (true) {
        if (this.queue.length === 0) {
          if (this.ended) break;
          await new Promise<void>((resolve) => (this.wake = resolve));
          this.wake = null;
          continue;
        }
        const batch = this.queue;
        this.queue = [];
        yield batch;
        for (const item of batch) this.bufferedBytes -= item.data.length;
      }
      if (this.endNotice) yield [this.endNotice];
    } finally {
      this.close();
    }
  }

  private *history(): Generator<StreamItem[]> {
    const pageSize = this.options.historyPageSize ?? 500;
    while (!this.ended) {
      const page = this.readAfter(this.cursor, pageSize);
      if (page.length === 0) return;
      yield page;
    }
  }

  private subscribe(): void {
    const { bus, conversationId, maxBuffered, includeDeltas } = this.options;
    this.unsubscribe = bus.subscribe(conversationId, (message) => this.onMessage(message, includeDeltas, maxBuffered));
    // Same tick as the subscription: nothing can be appended in between.
    for (;;) {
      const tail = this.readAfter(this.cursor, 10_000);
      if (tail.length === 0) break;
      for (const item of tail) this.enqueue(item);
    }
  }

  private onMessage(message: BusMessage, includeDeltas: boolean, maxBuffered: number): void {
    if (this.ended) return;
    if (message.type === 'closed') {
      const notice: z.infer<typeof StreamClosedNotice> = { reason: 'conversation_deleted', conversation_id: message.conversationId };
      this.close(noticeItem('stream_closed', notice));
      return;
    }
    if (this.queue.length >= maxBuffered || this.bufferedBytes >= this.options.maxBufferedBytes) {
      const notice: z.infer<typeof StreamOverflowNotice> = { reason: 'subscriber_too_slow', resume_after: String(this.cursor) };
      this.close(noticeItem('stream_overflow', notice));
      return;
    }
    if (message.type === 'delta') {
      if (includeDeltas) this.enqueue(sharedItem(conversationFrames, message, () => noticeItem('message_delta', message.delta)));
    } else {
      const cursor = this.options.conversationId === null ? message.appended.globalCursor : message.appended.event.seq;
      if (cursor <= this.cursor) return;
      this.cursor = cursor;
      const frames = this.options.conversationId === null ? firehoseFrames : conversationFrames;
      this.enqueue(sharedItem(frames, message, () => toItem(cursor, message.appended)));
    }
    this.wake?.();
  }

  /** Characters of JSON count as bytes: the cap is on memory, and ASCII-escaped JSON is close to it. */
  private enqueue(item: StreamItem): void {
    this.queue.push(item);
    this.bufferedBytes += item.data.length;
  }

  /** Read from the log after a cursor, advancing this.cursor. */
  private readAfter(after: number, limit: number): StreamItem[] {
    const { log, conversationId } = this.options;
    if (conversationId === null) {
      const entries = log.readGlobal(after, limit);
      const items = entries.map((entry) => toItem(entry.globalCursor, entry.stored));
      if (entries.length > 0) this.cursor = entries[entries.length - 1]!.globalCursor;
      return items;
    }
    const events = log.read(conversationId, { order: 'asc', cursorSeq: after, limit });
    if (events.length > 0) this.cursor = events[events.length - 1]!.event.seq;
    return events.map((stored) => toItem(stored.event.seq, stored));
  }
}

function toItem(cursor: number, stored: StoredEvent): StreamItem {
  const id = String(cursor);
  return { id, event: stored.event.kind, data: stored.json, frame: `id: ${id}\nevent: ${stored.event.kind}\ndata: ${stored.json}\n\n` };
}

/** An item without a cursor (a delta or a notice); its JSON has no line break, so one data line. */
export function noticeItem(event: string, body: unknown): StreamItem {
  const data = JSON.stringify(body);
  return { event, data, frame: `event: ${event}\ndata: ${data}\n\n` };
}

function sharedItem(frames: WeakMap<object, StreamItem>, key: object, make: () => StreamItem): StreamItem {
  let item = frames.get(key);
  if (!item) {
    item = make();
    frames.set(key, item);
  }
  return item;
}
