import { isoTimestamp } from '../clock.js';
import { DamagedDataError } from '../errors.js';
import type { EventLog, StoredEvent } from '../events/event-log.js';
import { retryDelayMs, retryWindowOver, type RetryPolicy } from './retry-policy.js';
import type { Scheduler } from './scheduler.js';
import type { DeliveryAttempt, SubscriptionState, WebhookStore } from './subscription-state.js';
import type { WebhookClient, WebhookResponse } from './webhook-client.js';
import { webhookHeaders } from './webhook-signature.js';

export interface DeliveryWorkerDeps {
  log: Pick<EventLog, 'read' | 'lastSeq'>;
  store: WebhookStore;
  client: WebhookClient;
  scheduler: Scheduler;
  policy: RetryPolicy;
  userAgent: string;
  conversationExists(conversationId: string): boolean;
  /** The key deliveries are signed with (server-wide callbacks take it from config). */
  secretOf(state: SubscriptionState): string | null;
  /** The conversation is gone: the subscription should go too. */
  onOrphaned(state: SubscriptionState): void;
  /** Retries ran out: the subscription is now `failing`. */
  onFailing(state: SubscriptionState): void;
  onError(error: unknown, state: SubscriptionState): void;
}

/**
 * Delivers one subscription's events, one at a time and in seq order, reading the durable log
 * after the subscription's cursor. Event N+1 is not sent before N got a 2xx; failures are retried
 * on the retry policy until its window is over, then the subscription is marked `failing` and the
 * worker rests until `enable()`. Every state change is saved before the worker moves on.
 *
 * `wake()` is only a signal ("there may be more in the log"): it never does work synchronously,
 * so appending an event never waits for a receiver.
 */
export class DeliveryWorker {
  private running: Promise<void> | null = null;
  private wanted = false;
  private stopped = false;
  /** The cursor moved past filtered-out events without being saved yet. */
  private dirty = false;
  private cancelSleep: (() => void) | null = null;
  private cancelRewake: (() => void) | null = null;
  private inFlight: AbortController | null = null;
  /** The stored event of `state.attempt`. */
  private current: StoredEvent | null = null;

  constructor(
    readonly state: SubscriptionState,
    private readonly deps: DeliveryWorkerDeps,
  ) {}

  wake(): void {
    if (this.stopped) return;
    this.wanted = true;
    if (this.running) return;
    this.running = Promise.resolve()
      .then(() => this.loop())
      .catch((error: unknown) => {
        this.deps.onError(error, this.state);
        // The conversation's stored events are damaged (quarantined): waiting does not mend them.
        if (error instanceof DamagedDataError) return;
        // Something outside the receiver failed (e.g. the disk): try again later rather than never.
        if (!this.stopped) this.cancelRewake = this.deps.scheduler.setTimer(() => this.wake(), Math.min(this.deps.policy.maxMs, 5_000));
      })
      .finally(() => {
        this.running = null;
        if (this.wanted && !this.stopped) this.wake();
      });
  }

  /** Resume a `failing` subscription where it stopped, with a fresh retry window. */
  enable(): void {
    const { state } = this;
    if (state.state === 'active') return;
    state.state = 'active';
    state.failing_since = null;
    if (state.attempt) {
      state.attempt.window_started_ms = this.deps.scheduler.now();
      state.attempt.retries_in_window = 0;
      state.attempt.next_retry_at = null;
    }
    this.save();
    this.wake();
  }

  /** Stop for good: cancel timers, abort the attempt in flight (it is not counted), optionally save the cursor. */
  async stop(options: { persist: boolean }): Promise<void> {
    this.stopped = true;
    this.cancelSleep?.();
    this.cancelRewake?.();
    this.inFlight?.abort();
    await this.running;
    if (options.persist && this.dirty) this.save();
  }

  private async loop(): Promise<void> {
    while (this.wanted && !this.stopped) {
      this.wanted = false;
      await this.drain();
    }
  }

  private async drain(): Promise<void> {
    while (!this.stopped && this.state.state === 'active') {
      if (!this.deps.conversationExists(this.state.conversation_id)) {
        this.deps.onOrphaned(this.state);
        return;
      }
      const event = await this.currentEvent();
      const attempt = this.state.attempt;
      if (!event || !attempt) return;
      const waitMs = attempt.next_retry_at ? Date.parse(attempt.next_retry_at) - this.deps.scheduler.now() : 0;
      if (waitMs > 0) await this.sleep(waitMs);
      else await this.attempt(event, attempt);
    }
  }

  /** The event being worked on: the persisted attempt's, or the next one after the cursor that passes the filter. */
  private async currentEvent(): Promise<StoredEvent | null> {
    const { log } = this.deps;
    const { state } = this;
    if (state.attempt) {
      if (this.current?.event.id === state.attempt.event_id) return this.current;
      const [stored] = await log.read(state.conversation_id, { order: 'asc', cursorSeq: state.attempt.seq - 1, limit: 1 });
      if (stored && stored.event.id === state.attempt.event_id) return (this.current = stored);
      // The log no longer has it (lost in a power cut before it reached the disk): carry on from the cursor.
      this.deps.onError(new Error(`event ${state.attempt.event_id} (seq ${state.attempt.seq}) is no longer in the log`), state);
      state.attempt = null;
      this.save();
    }
    this.current = null;
    // The last seq is read before the next event: with a log across the network an append can
    // commit between the two reads, and a last seq read after would skip that event.
    const last = await log.lastSeq(state.conversation_id);
    const [next] = await log.read(state.conversation_id, { order: 'asc', cursorSeq: state.cursor, limit: 1, kinds: state.events ?? undefined });
    if (!next) {
      // Past filtered-out events; or back, if the log lost its tail in a power cut (new events reuse those seqs).
      if (last !== state.cursor) this.moveCursor(last);
      return null;
    }
    if (next.event.seq - 1 > state.cursor) this.moveCursor(next.event.seq - 1);
    state.attempt = {
      event_id: next.event.id,
      seq: next.event.seq,
      kind: next.event.kind,
      attempts: 0,
      window_started_ms: this.deps.scheduler.now(),
      retries_in_window: 0,
      last_status: null,
      last_error: null,
      last_attempt_at: null,
      next_retry_at: null,
    };
    return (this.current = next);
  }

  private moveCursor(seq: number): void {
    this.state.cursor = seq;
    this.dirty = true;
  }

  private async attempt(stored: StoredEvent, attempt: DeliveryAttempt): Promise<void> {
    const { scheduler, client, userAgent } = this.deps;
    const { state } = this;
    const startedMs = scheduler.now();
    const body = `{"conversation_id":${JSON.stringify(state.conversation_id)},"event":${stored.json}}`;
    const headers = webhookHeaders({ id: stored.event.id, timestamp: Math.floor(startedMs / 1000), body, secret: this.deps.secretOf(state), userAgent });
    const controller = new AbortController();
    this.inFlight = controller;
    const response = await client.post({ url: state.url, headers, body, signal: controller.signal });
    this.inFlight = null;
    if (this.stopped) return;
    attempt.attempts += 1;
    attempt.last_attempt_at = isoTimestamp(startedMs);
    attempt.last_status = response.status;
    if (response.status !== null && response.status >= 200 && response.status < 300) this.succeeded(attempt);
    else this.failed(attempt, response);
  }

  private succeeded(attempt: DeliveryAttempt): void {
    const { state } = this;
    state.cursor = attempt.seq;
    state.attempt = null;
    this.current = null;
    state.delivered_count += 1;
    state.last_delivered_at = isoTimestamp(this.deps.scheduler.now());
    // The cursor first: a crash in between loses a log line, never re-sends or skips an event.
    this.save();
    this.deps.store.appendDelivery(state.id, {
      event_id: attempt.event_id,
      seq: attempt.seq,
      kind: attempt.kind,
      attempts: attempt.attempts,
      last_status: attempt.last_status,
      last_error: null,
      last_attempt_at: attempt.last_attempt_at,
    });
  }

  private failed(attempt: DeliveryAttempt, response: WebhookResponse): void {
    const { state } = this;
    const { scheduler, policy } = this.deps;
    const error = describeFailure(response);
    const nowMs = scheduler.now();
    attempt.last_error = error;
    attempt.retries_in_window += 1;
    state.failed_attempt_count += 1;
    state.last_error = error;
    if (retryWindowOver({ windowStartedMs: attempt.window_started_ms, nowMs, policy })) {
      state.state = 'failing';
      state.failing_since = isoTimestamp(nowMs);
      attempt.next_retry_at = null;
      this.save();
      this.deps.onFailing(state);
      return;
    }
    attempt.next_retry_at = isoTimestamp(nowMs + retryDelayMs({ retry: attempt.retries_in_window, policy, random: () => scheduler.random() }));
    this.save();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const cancelTimer = this.deps.scheduler.setTimer(() => {
        this.cancelSleep = null;
        resolve();
      }, ms);
      this.cancelSleep = () => {
        cancelTimer();
        this.cancelSleep = null;
        resolve();
      };
    });
  }

  private save(): void {
    this.deps.store.save(this.state);
    this.dirty = false;
  }
}

function describeFailure(response: WebhookResponse): string {
  if (response.status === null) return response.error;
  if (response.status >= 300 && response.status < 400) return `HTTP ${response.status} (redirects are not followed)`;
  return `HTTP ${response.status}`;
}
