import { afterThisTurn } from '../after-this-turn.js';
import type { StoredEvent } from './stored-event.js';

/** One event of a subscription with its cursor (its seq, or its global cursor for the firehose). */
export interface LogEntry {
  cursor: number;
  /** Live entries share this object among all subscribers (encode it once, see event-stream.ts). */
  stored: StoredEvent;
}

export type SubscriptionItem<Side = never> =
  | ({ type: 'event' } & LogEntry)
  /** Something that travels beside the log (streaming-only deltas), in the order it happened. */
  | { type: 'side'; value: Side }
  /** The conversation was dropped (deleted): the subscription ends. */
  | { type: 'closed'; conversationId: string }
  /** The subscriber did not keep up: the subscription ends; resume after `resumeAfter`. */
  | { type: 'overflow'; resumeAfter: number };

export interface SubscriptionLimits {
  /** Live items buffered for a subscriber that does not keep up; past it the subscription ends with `overflow`. */
  maxBuffered: number;
  /** The same cap in bytes (a few large events can hold more memory than many small ones). */
  maxBufferedBytes: number;
  /** History is read in pages of this many events. */
  historyPageSize?: number;
}

export const UNLIMITED: SubscriptionLimits = { maxBuffered: Number.POSITIVE_INFINITY, maxBufferedBytes: Number.POSITIVE_INFINITY };

/** A reader of the log from a cursor: history, then live, with no gap and no duplicate. */
export interface EventSubscription<Side = never> extends AsyncIterable<SubscriptionItem<Side>> {
  /** History a page at a time, then everything queued since the last batch was taken. */
  batches(): AsyncGenerator<SubscriptionItem<Side>[]>;
  /** Add an item beside the log's events (kept in order with them; dropped until the subscription is live). */
  interleave(value: Side, bytes: number): void;
  /** The cursor of the last event handed out. */
  readonly cursor: number;
  readonly closed: boolean;
  /** History is caught up: items now arrive as they are stored. */
  readonly live: boolean;
  /** End the subscription (what is queued is still handed out). */
  close(): void;
  /** Called once when the subscription ends, for whatever reason (at once if it already has). */
  onClose(listener: () => void): void;
}

/** How an implementation feeds a `QueuedSubscription`: it reads history; live items it hands to `receive`. */
export interface SubscriptionSource {
  /** A page of history after the cursor, ascending (empty once caught up). */
  page(after: number, limit: number): Promise<LogEntry[]>;
  /**
   * The switch: everything stored after `after` until now. Live items are handed to `receive`
   * from the moment the subscription exists; those that arrive before the tail is in are held
   * and merged by cursor, so nothing falls between the last page and the first live item.
   */
  tail(after: number): Promise<LogEntry[]>;
  /** The subscription ended: stop handing it items. */
  release(): void;
}

/**
 * The queue behind a subscription, shared by the implementations: history pages first, then live
 * items. Anything at or below the last cursor handed out is skipped, so a log that pushes an entry
 * it also returns in the tail delivers it once. Live events that arrive while history is read are
 * ignored (the tail read at the switch has them); `closed` is kept whenever it comes.
 */
export class QueuedSubscription<Side = never> implements EventSubscription<Side> {
  private queue: SubscriptionItem<Side>[] = [];
  /** Bytes in the queue, and in the batch the consumer holds: what a slow subscriber keeps in memory. */
  private queuedBytes = 0;
  private takenBytes = 0;
  private wake: (() => void) | null = null;
  /** Already among those to wake (the first item queued since the consumer waited scheduled it). */
  private wakeDue = false;
  private ended = false;
  private isLive = false;
  /** Live items pushed while the switch is under way. */
  private held: SubscriptionItem[] | null = null;
  private last: number;
  private closeListeners: (() => void)[] = [];

  constructor(
    private readonly source: SubscriptionSource,
    after: number,
    private readonly limits: SubscriptionLimits,
  ) {
    this.last = after;
  }

  get cursor(): number {
    return this.last;
  }

  get closed(): boolean {
    return this.ended;
  }

  get live(): boolean {
    return this.isLive && !this.ended;
  }

  close(): void {
    if (this.ended) return;
    this.ended = true;
    this.source.release();
    this.wake?.();
    for (const listener of this.closeListeners.splice(0)) listener();
  }

  onClose(listener: () => void): void {
    if (this.ended) listener();
    else this.closeListeners.push(listener);
  }

  interleave(value: Side, bytes: number): void {
    if (!this.isLive || this.ended || this.overflowed()) return;
    this.enqueue({ type: 'side', value }, bytes);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<SubscriptionItem<Side>> {
    for await (const batch of this.batches()) yield* batch;
  }

  async *batches(): AsyncGenerator<SubscriptionItem<Side>[]> {
    try {
      const pageSize = this.limits.historyPageSize ?? 500;
      while (!this.ended) {
        const page = this.fresh(await this.source.page(this.last, pageSize));
        if (page.length === 0) break;
        yield page;
      }
      if (!this.ended) await this.goLive();
      while (true) {
        if (this.queue.length === 0) {
          if (this.ended) break;
          await new Promise<void>((resolve) => (this.wake = resolve));
          this.wake = null;
          continue;
        }
        const batch = this.queue;
        this.queue = [];
        this.takenBytes = this.queuedBytes;
        this.queuedBytes = 0;
        yield batch;
        this.takenBytes = 0;
      }
    } finally {
      this.close();
    }
  }

  private async goLive(): Promise<void> {
    this.held = [];
    const tail = await this.source.tail(this.last);
    const held = this.held;
    this.held = null;
    if (this.ended) return;
    this.isLive = true;
    for (const item of this.fresh(tail)) this.enqueue(item, sizeOf(item));
    for (const item of held) this.receive(item);
  }

  /** A live item from the implementation. */
  receive(item: SubscriptionItem): void {
    if (this.ended) return;
    if (this.held) {
      this.held.push(item);
      return;
    }
    if (item.type === 'closed') {
      this.enqueue(item, 0);
      return this.close();
    }
    if (!this.isLive || item.type !== 'event' || item.cursor <= this.last) return;
    if (this.overflowed()) return;
    this.last = item.cursor;
    this.enqueue(item, item.stored.json.length);
  }

  /** Past the caps: the subscription ends with `overflow`, resumable after the last cursor handed out. */
  private overflowed(): boolean {
    if (this.queue.length < this.limits.maxBuffered && this.queuedBytes + this.takenBytes < this.limits.maxBufferedBytes) return false;
    this.enqueue({ type: 'overflow', resumeAfter: this.last }, 0);
    this.close();
    return true;
  }

  /** Entries past the last cursor, advancing it. */
  private fresh(entries: LogEntry[]): SubscriptionItem<Side>[] {
    const out: SubscriptionItem<Side>[] = [];
    for (const entry of entries) {
      if (entry.cursor <= this.last) continue;
      this.last = entry.cursor;
      out.push({ type: 'event', ...entry });
    }
    return out;
  }

  /** JSON characters count as bytes: the cap is on memory, and ASCII-escaped JSON is close to it. */
  private enqueue(item: SubscriptionItem<Side>, bytes: number): void {
    this.queue.push(item);
    this.queuedBytes += bytes;
    if (this.wake && !this.wakeDue) {
      this.wakeDue = true;
      wakeAtEndOfTurn(this);
    }
  }

  /** Called at the end of the turn in which items were queued (see wakeAtEndOfTurn). */
  wakeNow(): void {
    this.wakeDue = false;
    this.wake?.();
  }
}

/**
 * Consumers waiting for items are woken at the end of the turn that queued them, after
 * everything the turn stores: a turn that appends ten events hands each subscriber one batch of
 * ten (one socket write per SSE subscriber) rather than ten batches of one. Also after the
 * turn's own immediates (afterThisTurn): the agent's next LLM request, sent right after it stored
 * a tool's result, goes out before the subscribers' writes of that result, not behind them (P1:
 * the request waited for the SSE write; with a thousand subscribers it would wait for a slice).
 *
 * At most WAKE_PER_TURN of them per turn, the longest waiting first; the others in the next
 * turns. A thousand subscribers' writes would otherwise hold the event loop for one long stretch
 * per batch of events (appends, requests and the agent wait behind them), and every batch would
 * pay a thousand writes however few events it has. Spread over turns, the work that stores
 * events runs between slices, and each subscriber's next write carries all that was stored
 * since its last one: fewer, larger writes the more subscribers and events there are.
 */
const WAKE_PER_TURN = 64;
const waking = new Set<{ wakeNow(): void }>();
let wakeScheduled = false;

function wakeAtEndOfTurn(subscription: { wakeNow(): void }): void {
  waking.add(subscription);
  if (wakeScheduled) return;
  wakeScheduled = true;
  afterThisTurn(wakeSome);
}

function wakeSome(): void {
  wakeScheduled = false;
  let woken = 0;
  // A Set iterates in insertion order, and deleting the entry being visited is safe.
  for (const each of waking) {
    waking.delete(each);
    each.wakeNow();
    if (++woken === WAKE_PER_TURN) break;
  }
  if (waking.size > 0) {
    wakeScheduled = true;
    setImmediate(wakeSome);
  }
}

function sizeOf(item: SubscriptionItem<unknown>): number {
  return item.type === 'event' ? item.stored.json.length : 0;
}
