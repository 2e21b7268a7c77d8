import type { z } from 'zod';
import type { StreamClosedNotice } from '../schemas/event.js';
import type { DeltaChannel } from './delta-channel.js';
import type { EventLog } from './event-log.js';
import { EventStream, noticeItem } from './event-stream.js';

/** Opens SSE-ready event streams and keeps track of them, so shutdown can end them all. */
export class EventStreams {
  private readonly open = new Set<EventStream>();

  constructor(private readonly options: { log: EventLog; deltas: DeltaChannel; maxBuffered: number; maxBufferedBytes: number }) {}

  openStream(options: { conversationId: string | null; afterCursor: number; visible?: ((conversationId: string) => boolean) | undefined }): EventStream {
    const stream = new EventStream({
      log: this.options.log,
      deltas: this.options.deltas,
      maxBuffered: this.options.maxBuffered,
      maxBufferedBytes: this.options.maxBufferedBytes,
      includeDeltas: true,
      ...options,
    });
    this.open.add(stream);
    return stream;
  }

  release(stream: EventStream): void {
    stream.close();
    this.open.delete(stream);
  }

  get size(): number {
    return this.open.size;
  }

  /** Open streams caught up with the log (receiving events as they are stored). */
  get liveCount(): number {
    let n = 0;
    for (const stream of this.open) if (stream.live) n += 1;
    return n;
  }

  closeAll(reason: 'server_shutting_down'): void {
    const notice: z.infer<typeof StreamClosedNotice> = { reason };
    for (const stream of this.open) stream.close(noticeItem('stream_closed', notice));
    this.open.clear();
  }
}
