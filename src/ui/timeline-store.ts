import type { Api } from './api.js';
import { LiveStream, type StreamState } from './live-stream.js';
import type { AgentEvent, Page } from './types.js';

/** Events loaded at first and per page of older ones: the page renders the tail, not all. */
export const PAGE_SIZE = 200;

/**
 * One conversation's timeline: the newest page of events, older pages on demand, then live
 * events from the conversation's stream (resumed after the last seq seen, deduplicated by seq),
 * and the `message_delta` text of the turn being streamed. Listeners hear of changes at most
 * once per animation frame.
 */
export class TimelineStore {
  events: AgentEvent[] = [];
  streaming = '';
  hasOlder = false;
  loadingOlder = false;
  state: StreamState = 'connecting';
  deleted = false;
  error: string | null = null;
  private readonly seen = new Set<number>();
  private olderPageId: string | null = null;
  private stream: LiveStream | null = null;
  private listeners = new Set<() => void>();
  private frame: number | null = null;
  private stopped = false;

  constructor(
    private readonly api: Api,
    readonly conversationId: string,
  ) {}

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async start(): Promise<void> {
    try {
      const page = await this.api.get<Page<AgentEvent>>(`/conversations/${this.conversationId}/events`, { order: 'desc', limit: PAGE_SIZE });
      if (this.stopped) return;
      this.add(page.items.slice().reverse());
      this.olderPageId = page.next_page_id;
      this.hasOlder = page.next_page_id !== null;
    } catch (error) {
      this.error = (error as Error).message;
      this.changed();
      return;
    }
    const last = this.events.at(-1)?.seq ?? 0;
    this.stream = new LiveStream({
      cursor: String(last),
      url: (cursor) => this.api.streamUrl(`/conversations/${this.conversationId}/events/stream`, { after_seq: cursor ?? 0 }),
      onState: (state) => {
        this.state = state;
        this.changed();
      },
      onEvent: (kind, data) => this.receive(kind, data),
    });
    this.changed();
  }

  stop(): void {
    this.stopped = true;
    this.stream?.close();
    if (this.frame !== null) cancelAnimationFrame(this.frame);
    this.listeners.clear();
  }

  async loadOlder(): Promise<void> {
    if (!this.hasOlder || this.loadingOlder || this.olderPageId === null) return;
    this.loadingOlder = true;
    this.changed();
    try {
      const page = await this.api.get<Page<AgentEvent>>(`/conversations/${this.conversationId}/events`, { order: 'desc', limit: PAGE_SIZE, page_id: this.olderPageId });
      this.add(page.items.slice().reverse());
      this.olderPageId = page.next_page_id;
      this.hasOlder = page.next_page_id !== null;
    } finally {
      this.loadingOlder = false;
      this.changed();
    }
  }

  private receive(kind: string, data: unknown): void {
    if (kind === 'message_delta') {
      // A subagent's text is shown once recorded, nested under its task call, not as the main agent's.
      const delta = data as { content_delta?: string; parent_tool_call_id?: string };
      if (delta.parent_tool_call_id) return;
      this.streaming += delta.content_delta ?? '';
    } else if (kind === 'stream_closed') {
      // LiveStream resumes by itself after any other close (a server restarting): only a deletion reaches here.
      this.deleted = true;
      this.stream?.close();
    } else if (kind === 'stream_overflow') {
      return;
    } else {
      const event = data as AgentEvent;
      if (typeof event.seq !== 'number') return;
      if (event.kind === 'action' || event.kind === 'state_update' || (event.kind === 'message' && event.source === 'agent')) {
        if (!event.parent_tool_call_id) this.streaming = '';
      }
      this.add([event]);
    }
    this.changed();
  }

  /** Adds events not seen yet, keeping seq order (a page of older ones lands in front). */
  private add(events: AgentEvent[]): void {
    const fresh = events.filter((event) => !this.seen.has(event.seq));
    if (fresh.length === 0) return;
    for (const event of fresh) this.seen.add(event.seq);
    const last = this.events.at(-1)?.seq ?? 0;
    if (fresh[0]!.seq > last && isSorted(fresh)) this.events = [...this.events, ...fresh];
    else this.events = [...this.events, ...fresh].sort((a, b) => a.seq - b.seq);
  }

  private changed(): void {
    if (this.frame !== null || this.stopped) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = null;
      for (const listener of this.listeners) listener();
    });
  }
}

function isSorted(events: AgentEvent[]): boolean {
  for (let index = 1; index < events.length; index += 1) if (events[index]!.seq <= events[index - 1]!.seq) return false;
  return true;
}
