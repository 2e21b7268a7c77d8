import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { EventKind } from '../schemas/event.js';
import { CallbackDelivery, CallbackOrigin, CallbackState } from './callback-schemas.js';

/** The event a subscription is working on: kept until a 2xx, persisted after every failed attempt. */
export const DeliveryAttempt = z.object({
  event_id: z.string(),
  seq: z.int().min(1),
  kind: EventKind,
  /** Every attempt at this event, across retry windows and restarts. */
  attempts: z.int().min(0),
  /** When the current retry window began (first attempt, or `enable`), ms since epoch. */
  window_started_ms: z.number(),
  /** Failed attempts in the current window: the backoff exponent. */
  retries_in_window: z.int().min(0),
  last_status: z.int().nullable(),
  last_error: z.string().nullable(),
  last_attempt_at: z.string().nullable(),
  next_retry_at: z.string().nullable(),
});
export type DeliveryAttempt = z.infer<typeof DeliveryAttempt>;

/** Everything kept about one subscription; the store writes it atomically as one record (and parses it with this schema on load). */
export const SubscriptionState = z.object({
  id: z.string(),
  conversation_id: z.string(),
  url: z.string(),
  events: z.array(EventKind).nullable(),
  /** Plain text in memory; the store encrypts it at rest. Server-wide callbacks keep null (the key comes from config). */
  secret: z.string().nullable(),
  origin: CallbackOrigin,
  state: CallbackState,
  failing_since: z.string().nullable(),
  created_at: z.string(),
  /** Every event with seq <= cursor is delivered or skipped by the filter. */
  cursor: z.int().min(0),
  attempt: DeliveryAttempt.nullable(),
  delivered_count: z.int().min(0),
  failed_attempt_count: z.int().min(0),
  last_delivered_at: z.string().nullable(),
  last_error: z.string().nullable(),
});
export type SubscriptionState = z.infer<typeof SubscriptionState>;

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
export const DeliveryRecord = CallbackDelivery.omit({ state: true, next_retry_at: true });
export type DeliveryRecord = z.infer<typeof DeliveryRecord>;

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
