import type { EventLog } from '../events/event-log.js';
import type { CallbackDelivery } from './callback-schemas.js';
import type { DeliveryAttempt, SubscriptionState, WebhookStore } from './subscription-state.js';

/**
 * One page of a subscription's delivery log, in seq order: the delivered events the store still
 * keeps, then the event in progress (pending, retrying or failed), then every event still waiting
 * in the log after it (pending). Cost: O(limit) plus the events the kind filter skips.
 */
export async function deliveryPage(options: {
  state: SubscriptionState;
  store: WebhookStore;
  log: Pick<EventLog, 'read'>;
  afterSeq: number;
  limit: number;
}): Promise<{ items: CallbackDelivery[]; more: boolean }> {
  const { state, store, log, afterSeq, limit } = options;
  const wanted = limit + 1;
  const items: CallbackDelivery[] = store
    .readDeliveries(state.id, { afterSeq, limit: wanted })
    .map((record) => ({ ...record, state: 'delivered', next_retry_at: null }));
  const attempt = state.attempt;
  if (items.length < wanted && attempt && attempt.seq > afterSeq) items.push(fromAttempt(attempt, state));
  if (items.length < wanted) {
    const waitingAfter = Math.max(afterSeq, state.cursor, attempt?.seq ?? 0);
    const waiting = await log.read(state.conversation_id, { order: 'asc', cursorSeq: waitingAfter, limit: wanted - items.length, kinds: state.events ?? undefined });
    for (const { event } of waiting) {
      items.push({ event_id: event.id, seq: event.seq, kind: event.kind, state: 'pending', attempts: 0, last_status: null, last_error: null, last_attempt_at: null, next_retry_at: null });
    }
  }
  const more = items.length > limit;
  if (more) items.length = limit;
  return { items, more };
}

function fromAttempt(attempt: DeliveryAttempt, state: SubscriptionState): CallbackDelivery {
  return {
    event_id: attempt.event_id,
    seq: attempt.seq,
    kind: attempt.kind,
    state: state.state === 'failing' ? 'failed' : attempt.attempts > 0 ? 'retrying' : 'pending',
    attempts: attempt.attempts,
    last_status: attempt.last_status,
    last_error: attempt.last_error,
    last_attempt_at: attempt.last_attempt_at,
    next_retry_at: state.state === 'failing' ? null : attempt.next_retry_at,
  };
}
