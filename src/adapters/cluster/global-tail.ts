/**
 * One instance's live view of the firehose across all instances: every committed event, in
 * commit order, exactly once. A notice that is the next position and carries its JSON is
 * delivered as it is; anything else (a gap, a bare notice, notices out of order) is a read of
 * the store from the last position delivered. A poll every `pollMs` catches up on notices that
 * never came (NATS down, a dropped LISTEN connection), so the feed is an accelerator, never the
 * record.
 */
import type { AgentEvent } from '../../core/schemas/event.js';
import type { FirehoseEntry } from '../../core/events/event-log.js';
import type { EventFeed, FeedNotice } from './event-feed.js';

export interface FirehoseStore {
  readGlobal(afterCursor: number, limit: number): Promise<FirehoseEntry[]>;
  globalHead(): Promise<number>;
}

export class GlobalTail {
  private last = 0;
  private readonly listeners = new Set<(entry: FirehoseEntry) => void>();
  private chain: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  /** Events delivered from a notice's own JSON vs read back from the store (for /metrics). */
  readonly stats = { inline: 0, read: 0 };

  constructor(
    private readonly store: FirehoseStore,
    private readonly feed: EventFeed | null,
    private readonly options: { pollMs?: number; onError?: (error: unknown) => void } = {},
  ) {}

  /** Starts at the current head: later events are delivered. */
  async start(): Promise<void> {
    this.last = await this.store.globalHead();
    await this.feed?.listen((notice) => this.enqueue(() => this.onNotice(notice)));
    const pollMs = this.options.pollMs ?? 1000;
    this.timer = setInterval(() => this.enqueue(() => this.catchUp()), pollMs);
    this.timer.unref();
  }

  /** The last position delivered. */
  get position(): number {
    return this.last;
  }

  onEntry(listener: (entry: FirehoseEntry) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** A notice from this instance itself (its own append): delivered without waiting for the feed. */
  notice(notice: FeedNotice): Promise<void> {
    return this.enqueue(() => this.onNotice(notice));
  }

  /** Catch up now (e.g. right after this instance appended). */
  poke(): Promise<void> {
    return this.enqueue(() => this.catchUp());
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.chain;
  }

  private enqueue(work: () => Promise<void>): Promise<void> {
    this.chain = this.chain.then(() => (this.closed ? undefined : work())).catch((error) => this.options.onError?.(error));
    return this.chain;
  }

  private async onNotice(notice: FeedNotice): Promise<void> {
    if (notice.globalCursor <= this.last) return;
    const inline = notice.globalCursor === this.last + 1 ? inlineEvent(notice) : null;
    if (inline) {
      this.deliver({ globalCursor: notice.globalCursor, stored: { event: inline, json: notice.json! } });
      this.stats.inline++;
      return;
    }
    await this.catchUp();
  }

  private async catchUp(): Promise<void> {
    for (;;) {
      const page = await this.store.readGlobal(this.last, 500);
      for (const entry of page) {
        this.deliver(entry);
        this.stats.read++;
      }
      if (page.length < 500) return;
    }
  }

  private deliver(entry: FirehoseEntry): void {
    // Positions are gapless when written; a deleted conversation's events leave holes behind.
    if (entry.globalCursor <= this.last) return;
    this.last = entry.globalCursor;
    for (const listener of this.listeners) listener(entry);
  }
}

/** A notice's own JSON, when it is the event the notice names; anything else is read from the store. */
function inlineEvent(notice: FeedNotice): AgentEvent | null {
  if (notice.json === undefined) return null;
  try {
    const event = JSON.parse(notice.json) as AgentEvent;
    return event.conversation_id === notice.conversationId && event.seq === notice.seq ? event : null;
  } catch {
    return null;
  }
}
