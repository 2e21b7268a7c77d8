/**
 * The chunks of a streamed chat completion, read from the answer's server-sent events as the
 * `openai` SDK's Stream reads them (same events, same errors), but straight from the bytes:
 * from undici's body stream when the answer came through llmFetch, without the SDK's chain of a
 * WHATWG ReadableStream over that stream, a byte buffer copied at every chunk and its line and
 * event decoders. That chain was the largest single cost of an LLM round trip on the server's
 * side (bench P1, P10).
 *
 * As the SDK: an event whose data starts with `[DONE]` ends the chunks (what follows is read and
 * ignored); data that is not JSON throws its SyntaxError; data with an `error` member throws the
 * SDK's APIError (no status: an error mid-stream); events named `thread.*` (Assistants) are
 * passed as `{ event, data }`. The caller's abort ends the iteration quietly; the caller checks
 * its signal. A body left unread (an error, the caller stopping) is destroyed: its connection is
 * not reused half-read.
 */
import type { Readable } from 'node:stream';

export interface ChatStreamSource {
  /** undici's body stream (see undici-llm-fetch.ts), or else the Response's body. */
  body: Readable | AsyncIterable<Uint8Array | string> | Iterable<Uint8Array | string>;
  /** The attempt's signal: an error after it aborted ends the chunks quietly. */
  signal: AbortSignal;
  /** The SDK's APIError for an `error` in the data, with the answer's headers. */
  apiError: (error: unknown) => Error;
}

interface ServerSentEvent {
  event: string | null;
  data: string;
}

export async function* readChatChunks(source: ChatStreamSource): AsyncGenerator<unknown> {
  const { body, signal } = source;
  const decoder = new TextDecoder();
  const events = new EventDecoder();
  let done = false;
  let consumed = false;
  /** The chunks of these events, none after `[DONE]`. */
  function* chunksOf(decoded: ServerSentEvent[]): Generator<unknown> {
    for (const event of decoded) {
      if (done) return;
      const data = dataOf(event, source);
      if (data === DONE) done = true;
      else yield data;
    }
  }
  try {
    for await (const chunk of body) yield* chunksOf(events.push(typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true })));
    yield* chunksOf(events.end(decoder.decode()));
    consumed = true;
  } catch (error) {
    // As the SDK: a stream stopped by the caller's abort ends without an error.
    if (signal.aborted || isAbortError(error)) return;
    throw error;
  } finally {
    if (!consumed && 'destroy' in body && typeof body.destroy === 'function') body.destroy();
  }
}

const DONE = Symbol('done');

function dataOf(event: ServerSentEvent, source: ChatStreamSource): unknown {
  if (event.data.startsWith('[DONE]')) return DONE;
  const data = JSON.parse(event.data) as unknown;
  if (event.event === null || !event.event.startsWith('thread.')) {
    if (data && typeof data === 'object' && (data as { error?: unknown }).error) throw source.apiError((data as { error: unknown }).error);
    return data;
  }
  return { event: event.event, data };
}

function isAbortError(error: unknown): boolean {
  return typeof error === 'object' && error !== null && ((error as { name?: unknown }).name === 'AbortError' || (error as { code?: unknown }).code === 'UND_ERR_ABORTED');
}

/**
 * Server-sent events from text in pieces: lines end with \n, \r\n or \r; `field: value` lines
 * (one space after the colon dropped), `:` comments skipped, a blank line ends an event (none if
 * it had neither data nor a name). Only `event` and `data` matter here.
 */
export class EventDecoder {
  private pending = '';
  private event: string | null = null;
  private data: string[] = [];

  push(text: string): ServerSentEvent[] {
    const out: ServerSentEvent[] = [];
    const buffer = this.pending + text;
    let start = 0;
    // What was pending holds no line end (but a last \r, maybe): a long line is not scanned again at every piece.
    let from = Math.max(0, this.pending.length - 1);
    // Found once, not at every line (most streams have no \r at all).
    let cr = buffer.indexOf('\r', from);
    for (;;) {
      const lf = buffer.indexOf('\n', Math.max(start, from));
      from = 0;
      if (cr !== -1 && cr < start) cr = buffer.indexOf('\r', start);
      const end = cr === -1 ? lf : lf === -1 ? cr : Math.min(cr, lf);
      if (end === -1) break;
      // A \r at the end of what arrived may be the first half of \r\n: wait for the next piece.
      if (end === cr && end === buffer.length - 1) break;
      this.line(buffer.slice(start, end), out);
      start = end + (end === cr && buffer[end + 1] === '\n' ? 2 : 1);
    }
    this.pending = buffer.slice(start);
    return out;
  }

  /** The rest after the last piece. As the SDK: an event the stream ended before its blank line is not one. */
  end(text = ''): ServerSentEvent[] {
    const out = this.push(text);
    const rest = this.pending;
    this.pending = '';
    // A \r held back is a line end after all; a last line without one still sets its field.
    if (rest.endsWith('\r')) this.line(rest.slice(0, -1), out);
    else if (rest !== '') this.line(rest, out);
    return out;
  }

  private line(line: string, out: ServerSentEvent[]): void {
    if (line === '') {
      if (this.event === null && this.data.length === 0) return;
      out.push({ event: this.event, data: this.data.join('\n') });
      this.event = null;
      this.data = [];
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
  }
}
