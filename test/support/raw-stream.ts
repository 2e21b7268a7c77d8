/**
 * HTTP/1.x responses read from a raw socket and decoded strictly, for tests of how a stream is
 * framed on the wire: each response's head, then its body by Content-Length, by chunks (every
 * chunk's size checked, the terminating chunk noted) or until the connection closes.
 */
import net from 'node:net';

export interface WireResponse {
  status: number;
  /** Header names in lower case. */
  headers: Record<string, string>;
  body: string;
  /** Chunked bodies: the size of every chunk received, in order (0 last when the body ended). */
  chunks: number[];
  /** The body ended as its framing says (length reached, terminating chunk, or the connection closed). */
  complete: boolean;
}

export interface RawConnection {
  /** Every byte received so far. */
  received(): Buffer;
  /** The responses in the bytes received so far (the last one possibly incomplete). */
  responses(): WireResponse[];
  /** Resolves when the decoded responses satisfy the predicate; rejects after timeoutMs. */
  waitFor(predicate: (responses: WireResponse[]) => boolean, timeoutMs?: number): Promise<WireResponse[]>;
  closed: Promise<void>;
  destroy(): void;
}

/** Connects and sends `requests` (already serialised, e.g. two pipelined ones) in one write. */
export async function rawConnection(url: string, requests: string): Promise<RawConnection> {
  const target = new URL(url);
  const socket = net.connect(Number(target.port), target.hostname);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const chunks: Buffer[] = [];
  let ended = false;
  const waiters = new Set<() => void>();
  socket.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    for (const waiter of [...waiters]) waiter();
  });
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) =>
    socket.on('close', () => {
      ended = true;
      for (const waiter of [...waiters]) waiter();
      resolve();
    }),
  );
  socket.write(requests);
  const received = () => Buffer.concat(chunks);
  const responses = () => decodeResponses(received(), ended);
  return {
    received,
    responses,
    closed,
    destroy: () => socket.destroy(),
    waitFor(predicate, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const decoded = responses();
          if (predicate(decoded)) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(decoded);
          } else if (ended) {
            waiters.delete(check);
            clearTimeout(timer);
            reject(new Error(`connection closed; received: ${JSON.stringify(received().toString('latin1').slice(-400))}`));
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out; received: ${JSON.stringify(received().toString('latin1').slice(-400))}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
  };
}

/** Decodes consecutive responses; throws on bytes that break HTTP/1.1 framing. */
export function decodeResponses(bytes: Buffer, connectionClosed: boolean): WireResponse[] {
  const out: WireResponse[] = [];
  let at = 0;
  while (at < bytes.length) {
    const headEnd = bytes.indexOf('\r\n\r\n', at, 'latin1');
    if (headEnd === -1) break;
    const [statusLine, ...lines] = bytes.toString('latin1', at, headEnd).split('\r\n');
    const status = /^HTTP\/1\.[01] (\d{3}) /.exec(statusLine!);
    if (!status) throw new Error(`not a status line: ${JSON.stringify(statusLine)}`);
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const response: WireResponse = { status: Number(status[1]), headers, body: '', chunks: [], complete: false };
    out.push(response);
    at = headEnd + 4;
    if (headers['transfer-encoding']?.toLowerCase() === 'chunked') {
      const body: Buffer[] = [];
      for (;;) {
        const sizeEnd = bytes.indexOf('\r\n', at, 'latin1');
        if (sizeEnd === -1) break;
        const sizeText = bytes.toString('latin1', at, sizeEnd);
        if (!/^[0-9a-f]+$/i.test(sizeText)) throw new Error(`bad chunk size line ${JSON.stringify(sizeText)}`);
        const size = Number.parseInt(sizeText, 16);
        if (size === 0) {
          if (bytes.length < sizeEnd + 4) break;
          if (bytes.toString('latin1', sizeEnd + 2, sizeEnd + 4) !== '\r\n') throw new Error('no CRLF after the last chunk');
          response.chunks.push(0);
          response.complete = true;
          at = sizeEnd + 4;
          break;
        }
        if (bytes.length < sizeEnd + 2 + size + 2) break;
        if (bytes.toString('latin1', sizeEnd + 2 + size, sizeEnd + 4 + size) !== '\r\n') throw new Error(`chunk of ${size} bytes not followed by CRLF`);
        body.push(bytes.subarray(sizeEnd + 2, sizeEnd + 2 + size));
        response.chunks.push(size);
        at = sizeEnd + 4 + size;
      }
      response.body = Buffer.concat(body).toString('utf8');
      if (!response.complete) return out;
    } else if (headers['content-length'] !== undefined) {
      const length = Number(headers['content-length']);
      response.body = bytes.toString('utf8', at, Math.min(bytes.length, at + length));
      response.complete = bytes.length >= at + length;
      at += length;
      if (!response.complete) return out;
    } else {
      // Delimited by the connection's end (HTTP/1.0 style).
      response.body = bytes.toString('utf8', at);
      response.complete = connectionClosed;
      return out;
    }
  }
  return out;
}

/** The SSE messages in a body: `id`, `event`, `data` of each complete block (comments and `retry:` dropped). */
export function sseMessages(body: string): { id?: string; event: string; data: string }[] {
  return body
    .split('\n\n')
    .slice(0, -1)
    .map((block) => {
      const fields: Record<string, string> = {};
      for (const line of block.split('\n')) {
        const colon = line.indexOf(':');
        if (colon > 0) fields[line.slice(0, colon)] = line.slice(colon + 2);
      }
      return fields;
    })
    .filter((fields) => fields.data !== undefined)
    .map((fields) => ({ ...(fields.id !== undefined ? { id: fields.id } : {}), event: fields.event ?? 'message', data: fields.data! }));
}
