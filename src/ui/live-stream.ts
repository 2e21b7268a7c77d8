/**
 * An SSE subscription that survives server restarts: EventSource retries by itself with
 * Last-Event-ID while the server is unreachable; when it gives up (an error answer, e.g. 503
 * while starting), a new EventSource resumes with `?after_seq=<last id>`. Either way nothing is
 * missed, and the caller drops anything it has already seen (by seq), so nothing is shown twice.
 * A `stream_closed` notice for any reason but a deletion (a server shutting down for a restart)
 * is a cue to resume the same way, backing off, not the end of the stream.
 */
export type StreamState = 'connecting' | 'live' | 'reconnecting';

const KINDS = [
  'system_prompt', 'message', 'action', 'observation', 'rejection', 'state_update', 'agent_error', 'usage', 'condensation',
  'hook', 'question', 'rewind', 'fork', 'interrupt', 'rollback', 'mcp_refused', 'reasoning', 'schedule_fire', 'message_delta', 'stream_overflow', 'stream_closed',
];

export interface LiveStreamOptions {
  /** The stream URL resuming after `cursor` (null: from the start). */
  url(cursor: string | null): string;
  cursor?: string | null;
  onEvent(kind: string, data: unknown, id: string): void;
  onState(state: StreamState): void;
}

export class LiveStream {
  private source: EventSource | null = null;
  private cursor: string | null;
  private retryTimer: ReturnType<typeof setTimeout> | null = null;
  private failures = 0;
  private closed = false;

  constructor(private readonly options: LiveStreamOptions) {
    this.cursor = options.cursor ?? null;
    this.connect();
  }

  get lastId(): string | null {
    return this.cursor;
  }

  close(): void {
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.source?.close();
  }

  private connect(): void {
    if (this.closed) return;
    this.options.onState(this.failures === 0 ? 'connecting' : 'reconnecting');
    const source = new EventSource(this.options.url(this.cursor));
    this.source = source;
    source.onopen = () => {
      this.failures = 0;
      this.options.onState('live');
    };
    source.onerror = () => {
      if (this.closed) return;
      this.options.onState('reconnecting');
      if (source.readyState === EventSource.CLOSED) this.retry();
    };
    const handle = (message: MessageEvent<string>) => {
      if (message.lastEventId) this.cursor = message.lastEventId;
      let data: unknown;
      try {
        data = JSON.parse(message.data);
      } catch {
        return;
      }
      if (message.type === 'stream_closed' && !isDeletion(data)) return this.retry();
      this.options.onEvent(message.type, data, message.lastEventId);
    };
    for (const kind of KINDS) source.addEventListener(kind, handle as EventListener);
    source.addEventListener('message', handle as EventListener);
  }

  private retry(): void {
    if (this.closed) return;
    this.source?.close();
    this.options.onState('reconnecting');
    this.failures += 1;
    const delay = Math.min(5000, 500 * 2 ** Math.min(this.failures, 4));
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }
}

/** The one `stream_closed` that ends a stream for good: its conversation is gone. */
function isDeletion(data: unknown): boolean {
  return typeof data === 'object' && data !== null && (data as { reason?: unknown }).reason === 'conversation_deleted';
}
