import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { EventPageQuery, StoredEvent } from '../../src/core/events/event-log.js';
import type { AgentEvent } from '../../src/core/schemas/event.js';
import { DEFAULT_RETRY_POLICY } from '../../src/core/webhooks/retry-policy.js';
import type { Scheduler } from '../../src/core/webhooks/scheduler.js';
import type { DeliveryRecord, SubscriptionState, WebhookStore } from '../../src/core/webhooks/subscription-state.js';
import { WebhookDispatcher } from '../../src/core/webhooks/webhook-dispatcher.js';
import type { WebhookClient } from '../../src/core/webhooks/webhook-client.js';

/** Virtual time: timers run in order, the clock jumps to each one, nothing really waits. */
class VirtualScheduler implements Scheduler {
  nowMs = Date.parse('2026-01-01T00:00:00.000Z');
  private timers: { at: number; callback: () => void; cancelled: boolean }[] = [];

  now = () => this.nowMs;
  random = () => 0.5;
  setTimer(callback: () => void, ms: number): () => void {
    const timer = { at: this.nowMs + ms, callback, cancelled: false };
    this.timers.push(timer);
    return () => (timer.cancelled = true);
  }

  /** Let pending work settle, then fire the earliest timer. False when no timer is left. */
  async step(): Promise<boolean> {
    await settle();
    this.timers = this.timers.filter((timer) => !timer.cancelled).sort((a, b) => a.at - b.at);
    const next = this.timers.shift();
    if (!next) return false;
    this.nowMs = Math.max(this.nowMs, next.at);
    next.callback();
    await settle();
    return true;
  }
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

function memoryLog(conversationId: string, count: number) {
  const events: StoredEvent[] = Array.from({ length: count }, (_, i) => {
    const event = { id: randomUUID(), seq: i + 1, conversation_id: conversationId, timestamp: new Date(0).toISOString(), kind: 'message', source: 'user', role: 'user', content: `m${i + 1}` } as AgentEvent;
    return { event, json: JSON.stringify(event) };
  });
  return {
    read: async (_id: string, query: EventPageQuery) => events.filter((stored) => stored.event.seq > (query.cursorSeq ?? 0) && (!query.kinds || query.kinds.includes(stored.event.kind))).slice(0, query.limit),
    lastSeq: async () => events.length,
  };
}

function memoryStore(): WebhookStore & { saved: number; records: DeliveryRecord[] } {
  const store = {
    saved: 0,
    records: [] as DeliveryRecord[],
    loadAll: () => [],
    save: () => void (store.saved += 1),
    remove: () => undefined,
    appendDelivery: (_id: string, record: DeliveryRecord) => void store.records.push(record),
    readDeliveries: () => [],
  };
  return store;
}

describe('the retry schedule (virtual time, default policy)', () => {
  it('retries with capped exponential backoff for at least 24 hours, then marks failing; enable resumes in order', async () => {
    const scheduler = new VirtualScheduler();
    const attempts: { at: number; seq: number }[] = [];
    let status = 503;
    const client: WebhookClient = {
      post: async (request) => {
        attempts.push({ at: scheduler.nowMs, seq: (JSON.parse(request.body) as { event: { seq: number } }).event.seq });
        return { status, error: null };
      },
      close: async () => undefined,
    };
    const conversationId = randomUUID();
    const store = memoryStore();
    const failing: string[] = [];
    const dispatcher = new WebhookDispatcher({
      log: memoryLog(conversationId, 3),
      store,
      client,
      scheduler,
      policy: DEFAULT_RETRY_POLICY,
      userAgent: 'agentd/test',
      conversationExists: () => true,
      secretOf: () => null,
      onOrphaned: () => undefined,
      onFailing: (state) => failing.push(state.id),
      onError: (error) => {
        throw error;
      },
    });
    const state: SubscriptionState = {
      id: randomUUID(), conversation_id: conversationId, url: 'http://receiver.invalid/hook', events: null, secret: null, origin: 'api', state: 'active',
      failing_since: null, created_at: new Date(scheduler.nowMs).toISOString(), cursor: 0, attempt: null,
      delivered_count: 0, failed_attempt_count: 0, last_delivered_at: null, last_error: null,
    };
    const worker = dispatcher.add(state);
    for (let guard = 0; state.state === 'active' && guard < 10_000; guard++) await scheduler.step();

    expect(state.state).toBe('failing');
    expect(failing).toEqual([state.id]);
    expect(attempts.every((attempt) => attempt.seq === 1)).toBe(true);
    const gaps = attempts.slice(1).map((attempt, i) => attempt.at - attempts[i]!.at);
    expect(gaps[0]).toBe(750); // 1 s with equal jitter at random() = 0.5
    expect(gaps[1]).toBe(1_500);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(10 * 60_000);
    const span = attempts[attempts.length - 1]!.at - attempts[0]!.at;
    expect(span).toBeGreaterThanOrEqual(24 * 60 * 60_000);
    expect(span).toBeLessThan(24 * 60 * 60_000 + 10 * 60_000);
    expect(state.attempt).toMatchObject({ seq: 1, attempts: attempts.length, next_retry_at: null, last_status: 503 });
    expect(store.saved).toBeGreaterThanOrEqual(attempts.length);

    // Nothing more happens while failing.
    const tried = attempts.length;
    expect(await scheduler.step()).toBe(false);
    expect(attempts).toHaveLength(tried);

    status = 204;
    worker.enable();
    for (let guard = 0; state.cursor < 3 && guard < 100; guard++) await scheduler.step();
    expect(attempts.slice(tried).map((attempt) => attempt.seq)).toEqual([1, 2, 3]);
    expect(store.records.map((record) => [record.seq, record.attempts])).toEqual([[1, tried + 1], [2, 1], [3, 1]]);
    expect(state).toMatchObject({ state: 'active', cursor: 3, attempt: null, delivered_count: 3, failed_attempt_count: tried });
    await dispatcher.close();
  });
});
