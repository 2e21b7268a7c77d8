import type { EventReader } from '../core/events/event-recorder.js';
import type { AppendedEvent } from '../core/events/event-log.js';

/**
 * How long no run must be in progress before the heap is compacted after runs (the default of
 * AGENTD_COMPACT_IDLE_S). A compaction is two full collections, and V8 throws away optimized code
 * that held objects they free, so the turns after one run slower code until V8 optimizes it again.
 * A person reading an answer pauses seconds between turns: with a threshold of a few seconds every
 * such pause paid for a compaction and its slower next turn (bench/RESULTS.md, P20). Only a server
 * that has really gone quiet gives its pages back.
 */
export const COMPACT_WHEN_IDLE_AFTER_MS = 30_000;

/** The same after start-up (listening), which nothing follows that would pay for it. */
export const COMPACT_AFTER_START_MS = 250;

/** At most this share of the main thread's time goes to these collections: after one took T ms, the next waits until T / share has passed. */
const MAX_SHARE_OF_TIME = 0.05;

export interface CompactWhenIdleDeps {
  /** One compacting full collection (compactHeap). */
  compact: () => Promise<unknown>;
  /** After runs (default COMPACT_WHEN_IDLE_AFTER_MS). */
  quietMs?: number;
  /** After start-up (default COMPACT_AFTER_START_MS). */
  startQuietMs?: number;
  /** Milliseconds, for the time a collection took (performance.now). */
  now?: () => number;
}

/**
 * Compacts the heap once a burst of runs is over: when the last run in progress ends and no run
 * starts for `quietMs`.
 *
 * Runs promote what they keep (each history's new entries) into the same old-space pages as what
 * they only used (requests, parsed answers, observations), and V8's own full collections free the
 * garbage but keep most of those pages, partly used. A server that has gone idle allocates nothing
 * that would trigger another collection, so it held them for as long as it idled (P16's RSS grew
 * most of all without it). One compacting collection when nothing runs gives the pages back; it
 * never runs while a run is in progress, nor twice without a run between, and it waits twenty times
 * its own last duration before the next, so that a server whose runs end every few seconds spends
 * little of its time on them (a burst that ends meanwhile is compacted then).
 */
export class CompactWhenIdle implements EventReader {
  readonly name = 'compact-when-idle';
  private readonly running = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private runsEnded = false;
  /** When the next collection may run (see MAX_SHARE_OF_TIME). */
  private notBefore = 0;

  constructor(private readonly deps: CompactWhenIdleDeps) {}

  read({ event }: AppendedEvent): void {
    if (event.kind !== 'state_update') return;
    const conversationId = event.conversation_id;
    if (event.status === 'running') {
      this.running.add(conversationId);
      this.cancel();
      return;
    }
    if (!this.running.delete(conversationId)) return;
    this.runsEnded = true;
    if (this.running.size === 0) this.schedule();
  }

  /** Start-up is done (the server listens): its garbage is compacted like a burst's, once no run is in progress for `quietMs`. */
  afterStart(): void {
    this.runsEnded = true;
    if (this.running.size === 0) this.schedule(this.deps.startQuietMs ?? COMPACT_AFTER_START_MS);
  }

  /** No collection is pending any more (the server stops). */
  close(): void {
    this.cancel();
  }

  private schedule(delayMs = this.deps.quietMs ?? COMPACT_WHEN_IDLE_AFTER_MS): void {
    this.cancel();
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.running.size > 0 || !this.runsEnded) return;
      const now = this.deps.now ?? (() => performance.now());
      const early = this.notBefore - now();
      if (early > 0) return this.schedule(early);
      this.runsEnded = false;
      const started = now();
      // A failed collection is not retried: the heap stays as V8 keeps it.
      void this.deps.compact().then(
        () => (this.notBefore = started + (now() - started) / MAX_SHARE_OF_TIME),
        () => undefined,
      );
    }, delayMs);
    this.timer.unref();
  }

  private cancel(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
