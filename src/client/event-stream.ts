import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { AgentdConnectionError, AgentdError } from './agentd-error.js';
import { describeError, errorOf, type HttpTransport } from './http-transport.js';
import type { StreamEvent } from './types.js';

export interface StreamOptions {
  /** Start after this cursor (a seq; the firehose's global cursor): 0 replays everything. */
  after?: number;
  /** Ends the stream (the iteration returns). */
  signal?: AbortSignal;
  /** How long to keep trying to reconnect before throwing AgentdConnectionError (default 60 s). */
  reconnectBudgetMs?: number;
  /** Called before each reconnect attempt (for progress lines). */
  onReconnect?: (attempt: number, cursor: number) => void;
  /** Called each time a connection is established (before its first event). */
  onOpen?: () => void;
}

/** The firehose's options: an admin key may follow one owner's conversations only. */
export interface FirehoseOptions extends StreamOptions {
  /** An admin key's filter (other keys see only their own owner's conversations). */
  owner?: string;
}

/** One frame of the stream: the event and, for persisted events, its cursor. */
export interface StreamItem {
  cursor: number | null;
  event: StreamEvent;
}

const FIRST_RETRY_MS = 200;
const MAX_RETRY_MS = 3000;

/**
 * An SSE stream of events that survives its connection: when the connection drops (or the server
 * restarts, or ends the stream because this reader fell behind), it reconnects with
 * `Last-Event-ID` set to the last cursor it delivered, so nothing is missed and nothing repeats.
 * Streamed-only deltas sent while disconnected are lost; the persisted message carries the text.
 * Ends when `signal` aborts, when the consumer stops iterating, or when the conversation is deleted.
 */
export async function* streamItems(transport: HttpTransport, path: string, options: StreamOptions = {}): AsyncGenerator<StreamItem> {
  let cursor = options.after ?? 0;
  let failingSince: number | null = null;
  let attempt = 0;
  const budget = options.reconnectBudgetMs ?? 60_000;
  while (!options.signal?.aborted) {
    const connection = new AbortController();
    const stop = () => connection.abort();
    options.signal?.addEventListener('abort', stop, { once: true });
    try {
      let response: Response;
      try {
        response = await transport.fetch(transport.url(path), {
          headers: transport.headers({ accept: 'text/event-stream', ...(cursor > 0 ? { 'last-event-id': String(cursor) } : {}) }),
          signal: connection.signal,
        });
      } catch (error) {
        if (options.signal?.aborted) return;
        throw new AgentdConnectionError(`cannot reach agentd at ${transport.baseUrl}: ${describeError(error)}`, { cause: error });
      }
      if (!response.ok) {
        const error = await errorOf(response);
        // 5xx and 503s of a server starting up are worth waiting for; a 4xx will not change.
        if (response.status < 500) throw error;
        throw new AgentdConnectionError(`agentd answered ${response.status}: ${error.message}`, { cause: error });
      }
      failingSince = null;
      attempt = 0;
      options.onOpen?.();
      let ended = false;
      for await (const message of messages(response, connection.signal)) {
        if (message.event === 'stream_overflow') break;
        if (message.event === 'stream_closed') {
          // The end only when the conversation is gone; a server shutting down (a restart) is reconnected to.
          ended = closedForGood(message.data);
          break;
        }
        if (!message.data) continue;
        const id = message.id !== undefined && /^\d+$/.test(message.id) ? Number(message.id) : null;
        if (id !== null && id <= cursor) continue;
        const event = JSON.parse(message.data) as StreamEvent;
        if (id !== null) cursor = id;
        yield { cursor: id, event };
      }
      if (ended) return;
    } catch (error) {
      if (options.signal?.aborted) return;
      if (error instanceof AgentdError) throw error;
      failingSince ??= Date.now();
      if (Date.now() - failingSince > budget) {
        throw error instanceof AgentdConnectionError ? error : new AgentdConnectionError(`the event stream broke and could not be resumed: ${describeError(error)}`, { cause: error });
      }
    } finally {
      options.signal?.removeEventListener('abort', stop);
      connection.abort();
    }
    if (options.signal?.aborted) return;
    attempt += 1;
    options.onReconnect?.(attempt, cursor);
    await sleep(Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** (attempt - 1)), options.signal);
  }
}

/** The SSE messages of one response body, parsed by eventsource-parser. */
async function* messages(response: Response, signal: AbortSignal): AsyncGenerator<EventSourceMessage> {
  if (!response.body) return;
  const queue: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (message) => queue.push(message) });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  try {
    while (!signal.aborted) {
      const { done, value } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
      while (queue.length > 0) yield queue.shift()!;
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

function closedForGood(data: string): boolean {
  try {
    return (JSON.parse(data) as { reason?: unknown }).reason === 'conversation_deleted';
  } catch {
    return true;
  }
}
