import { randomUUID } from 'node:crypto';
import type { EventKind } from '../schemas/event.js';
import type { CallbackDelivery, CallbackOrigin, CallbackState } from './callback-schemas.js';

/** The event a subscription is working on: kept until a 2xx, persisted after every failed attempt. */
export interface DeliveryAttempt {
  event_id: string;
  seq: number;
  kind: EventKind;
  /** Every attempt at this event, across retry windows and restarts. */
  attempts: number;
  /** When the current retry window began (first attempt, or `enable`), ms since epoch. */
  window_started_ms: number;
  /** Failed attempts in the current window: the backoff exponent. */
  retries_in_window: number;
  last_status: number | null;
  last_error: string | null;
  last_attempt_at: string | null;
  next_retry_at: string | null;
}

/** Everything kept about one subscription; the store writes it atomically as one record. */
export interface SubscriptionState {
  id: string;
  conversation_id: string;
  url: string;
  events: EventKind[] | null;
  /** Plain text in memory; the store encrypts it at rest. Server-wide callbacks keep null (the key comes from config). */
  secret: string | null;
  origin: CallbackOrigin;
  state: CallbackState;
  failing_since: string | null;
  created_at: string;
  /** Every event with seq <= cursor is delivered or skipped by the filter. */
  cursor: number;
  attempt: DeliveryAttempt | null;
  delivered_count: number;
  failed_attempt_count: number;
  last_delivered_at: string | null;
  last_error: string | null;
}

/** A subscription that has delivered nothing yet, starting after `cursor`. */
export function newSubscriptionState(options: {
  conversationId: string;
  url: string;
  events: EventKind[] | null;
  secret: string | null;
  origin: CallbackOrigin;
  cursor: number;
  createdAt: string;
}): SubscriptionState {
  return {
    id: randomUUID(),
    conversation_id: options.conversationId,
    url: options.url,
    events: options.events,
    secret: options.secret,
    origin: options.origin,
    state: 'active',
    failing_since: null,
    created_at: options.createdAt,
    cursor: options.cursor,
    attempt: null,
    delivered_count: 0,
    failed_attempt_count: 0,
    last_delivered_at: null,
    last_error: null,
  };
}

/** One line of the delivery log: an event that was delivered. */
export type DeliveryRecord = Omit<CallbackDelivery, 'state' | 'next_retry_at'>;

/**
 * Where subscriptions persist. `save` is atomic (a crash leaves the old or the new state), so
 * the cursor and the attempt in progress always agree. The delivery log keeps the most recent
 * delivered events of each subscription (a bounded history, in seq order).
 */
export interface WebhookStore {
  loadAll(): SubscriptionState[];
  save(state: SubscriptionState): void;
  remove(subscriptionId: string): void;
  appendDelivery(subscriptionId: string, record: DeliveryRecord): void;
  /** Delivered records with seq > afterSeq, oldest first. */
  readDeliveries(subscriptionId: string, options: { afterSeq: number; limit: number }): DeliveryRecord[];
}
