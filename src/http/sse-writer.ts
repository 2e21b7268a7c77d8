import type { ServerResponse } from 'node:http';
import type { StreamItem } from '../core/events/event-stream.js';

/**
 * Writes an SSE response's batches of frames. A batch is encoded once for every subscriber that
 * gets the same batch (those caught up with the log get the same items, in the same order, in
 * the same turn), and, once the response's head is out, written straight to its socket as one
 * HTTP/1.1 chunk framed here: one `socket.write` of one shared Buffer per subscriber and batch,
 * where `response.write` would cork the socket, queue the chunk's size line, data and CRLF as
 * three writes and flush them with a `writev` on the next tick. The bytes on the wire are the
 * same. Whatever the response itself still holds, or a response that is not its socket's
 * current one, goes through `response.write` as before.
 */
export class SseWriter {
  /** The heartbeat tick (sse-heartbeats.ts) of the last write. */
  lastTick = 0;
  /** Waiting for the connection to take more: nothing else is written meanwhile. */
  blocked = false;

  constructor(
    private readonly response: ServerResponse,
    private readonly clock: { tick: number },
  ) {}

  /** Like `write()`: false when the caller should wait for `drained()` before the next batch. */
  write(batch: StreamItem[]): boolean {
    if (batch.length === 0) return true;
    this.lastTick = this.clock.tick;
    const socket = this.direct();
    if (!socket) return this.response.write(encoded(batch).plain);
    const bytes = encoded(batch);
    return socket.write(this.response.chunkedEncoding ? framed(bytes) : bytes.plain);
  }

  /** A heartbeat comment (ignored by clients; keeps proxies and the client's idle timers from closing the connection). */
  heartbeat(): void {
    this.lastTick = this.clock.tick;
    const socket = this.direct();
    if (!socket) this.response.write(HEARTBEAT_TEXT);
    else socket.write(this.response.chunkedEncoding ? HEARTBEAT_CHUNK : HEARTBEAT);
  }

  get closed(): boolean {
    return this.response.destroyed;
  }

  /** Resolves once the connection takes more, or rejects when it closes first. */
  drained(): Promise<void> {
    const emitter = this.direct() ?? this.response;
    this.blocked = true;
    return new Promise((resolve, reject) => {
      const done = (error?: Error) => {
        this.blocked = false;
        emitter.off('drain', onDrain);
        this.response.off('close', onClose);
        if (error) reject(error);
        else resolve();
      };
      const onDrain = () => done();
      const onClose = () => done(new Error('closed'));
      emitter.on('drain', onDrain);
      this.response.on('close', onClose);
    });
  }

  /**
   * The socket, when bytes written to it land right after what the response has written: the
   * head is sent, the response is the socket's current one (a pipelined response waits for its
   * socket) and holds nothing back itself (its own length is its socket's).
   */
  private direct(): ServerResponse['socket'] {
    const { response } = this;
    const socket = response.socket;
    // HTTP/1.x only: an HTTP/2 response's socket carries the session's frames.
    if (!socket || response.req.httpVersionMajor !== 1 || !response.headersSent || response.writableEnded || !socket.writable) return null;
    return response.writableLength === socket.writableLength ? socket : null;
  }
}

interface EncodedBatch {
  items: StreamItem[];
  /** The frames as bytes. */
  plain: Buffer;
  /** The same as one HTTP/1.1 chunk (size line, frames, CRLF), made when first needed. */
  chunk: Buffer | null;
}

/** The last batch encoded, by its first item: subscribers woken together share it. */
const encodedBatches = new WeakMap<StreamItem, EncodedBatch>();

function encoded(batch: StreamItem[]): EncodedBatch {
  const first = batch[0]!;
  const known = encodedBatches.get(first);
  if (known && sameItems(known.items, batch)) return known;
  const plain = Buffer.from(batch.length === 1 ? first.frame : batch.map((item) => item.frame).join(''), 'utf8');
  const made: EncodedBatch = { items: batch, plain, chunk: null };
  encodedBatches.set(first, made);
  return made;
}

function sameItems(known: StreamItem[], batch: StreamItem[]): boolean {
  if (known === batch) return true;
  if (known.length !== batch.length) return false;
  for (let i = known.length - 1; i >= 0; i--) if (known[i] !== batch[i]) return false;
  return true;
}

const CRLF = Buffer.from('\r\n');
const HEARTBEAT_TEXT = ': heartbeat\n\n';
const HEARTBEAT = Buffer.from(HEARTBEAT_TEXT);
const HEARTBEAT_CHUNK = Buffer.from(`${HEARTBEAT.length.toString(16)}\r\n${HEARTBEAT_TEXT}\r\n`);

/** A non-empty batch as one chunk of a chunked body (an empty chunk would end the body). */
function framed(bytes: EncodedBatch): Buffer {
  if (!bytes.chunk) {
    const size = Buffer.from(`${bytes.plain.length.toString(16)}\r\n`, 'latin1');
    bytes.chunk = Buffer.concat([size, bytes.plain, CRLF], size.length + bytes.plain.length + CRLF.length);
  }
  return bytes.chunk;
}
