import { isoTimestamp, type Clock } from '../clock.js';
import { ConflictError, NotFoundError, UnprocessableError } from '../errors.js';
import type { EventLog } from '../events/event-log.js';
import { decodePageId, encodePageId, isKeyCursor, type Page } from '../pagination.js';
import type { Callback, CallbackDelivery, CreateCallbackBody } from './callback-schemas.js';
import type { DeliveryWorker } from './delivery-worker.js';
import { deliveryPage } from './delivery-log.js';
import { normalizeCallbackUrl, redactUrlCredentials } from './callback-url.js';
import type { WebhookTargets } from './webhook-targets.js';
import { newSubscriptionState, type SubscriptionState, type WebhookStore } from './subscription-state.js';
import type { WebhookDispatcher } from './webhook-dispatcher.js';
import { isValidSecret } from './webhook-signature.js';

/** Callbacks a conversation may have through the API (server-wide ones do not count). */
export const MAX_CALLBACKS_PER_CONVERSATION = 100;

export interface CallbackServiceDeps {
  store: WebhookStore;
  dispatcher: WebhookDispatcher;
  log: Pick<EventLog, 'read' | 'count' | 'lastSeq'>;
  conversationExists(conversationId: string): boolean;
  /** The owner of the conversation (a callback is its conversation's owner's). */
  ownerOf?: (conversationId: string) => string | null;
  clock: Clock;
  /** Server-wide callbacks sign their deliveries (AGENTD_WEBHOOK_SECRET is set). */
  serverSecretSet: boolean;
  /** Where deliveries may go. */
  targets: WebhookTargets;
}

const isSeqCursor = (value: unknown): value is { s: number } =>
  typeof value === 'object' && value !== null && Number.isInteger((value as { s: number }).s) && (value as { s: number }).s >= 0;

/** What the callback routes call: subscriptions of one conversation, their delivery log, enable. */
export class CallbackService {
  constructor(private readonly deps: CallbackServiceDeps) {}

  /** Start delivering the persisted subscriptions that still apply; drop the others. */
  start(loaded: readonly SubscriptionState[], keep: (state: SubscriptionState) => boolean): void {
    for (const state of loaded) {
      if (this.deps.conversationExists(state.conversation_id) && keep(state)) this.deps.dispatcher.add(state);
      else this.deps.store.remove(state.id);
    }
  }

  async create(conversationId: string, body: CreateCallbackBody): Promise<Callback> {
    this.assertConversation(conversationId);
    const url = normalizeCallbackUrl(body.url);
    const refusal = this.deps.targets.urlRefusal(new URL(url));
    if (refusal !== null) throw new UnprocessableError('callback_target_refused', `Webhooks are not delivered there: ${refusal}.`, { url: redactUrlCredentials(url) });
    if (body.secret !== undefined && !isValidSecret(body.secret)) {
      throw new UnprocessableError('invalid_callback_secret', 'A secret starting with `whsec_` must continue with base64 (Standard Webhooks); any other string is used as its UTF-8 bytes.');
    }
    const own = this.deps.dispatcher.forConversation(conversationId).filter((worker) => worker.state.origin === 'api');
    if (own.length >= MAX_CALLBACKS_PER_CONVERSATION) {
      throw new ConflictError('too_many_callbacks', `A conversation can have at most ${MAX_CALLBACKS_PER_CONVERSATION} callbacks; delete one first.`, { limit: MAX_CALLBACKS_PER_CONVERSATION });
    }
    const lastSeq = await this.deps.log.lastSeq(conversationId);
    // The limit is checked again: another create may have finished while the log was read.
    if (this.deps.dispatcher.forConversation(conversationId).filter((worker) => worker.state.origin === 'api').length >= MAX_CALLBACKS_PER_CONVERSATION) {
      throw new ConflictError('too_many_callbacks', `A conversation can have at most ${MAX_CALLBACKS_PER_CONVERSATION} callbacks; delete one first.`, { limit: MAX_CALLBACKS_PER_CONVERSATION });
    }
    this.assertConversation(conversationId);
    const state = newSubscriptionState({
      conversationId,
      url,
      events: body.events ? [...new Set(body.events)] : null,
      secret: body.secret ?? null,
      origin: 'api',
      cursor: body.from === 'now' ? lastSeq : Math.min(body.after_seq ?? 0, lastSeq),
      createdAt: isoTimestamp(this.deps.clock.now()),
    });
    this.deps.store.save(state);
    this.deps.dispatcher.add(state);
    return this.toPublic(state);
  }

  async list(conversationId: string, query: { pageId?: string | undefined; limit: number }): Promise<Page<Callback>> {
    this.assertConversation(conversationId);
    const states = this.deps.dispatcher
      .forConversation(conversationId)
      .map((worker) => worker.state)
      .sort((a, b) => compareKeys(a, b.created_at, b.id));
    const cursor = query.pageId ? decodePageId(query.pageId, isKeyCursor) : undefined;
    const start = cursor ? states.findIndex((state) => compareKeys(state, cursor.k, cursor.i) > 0) : 0;
    const from = start < 0 ? states.length : start;
    const items = states.slice(from, from + query.limit);
    const last = items[items.length - 1];
    const more = from + query.limit < states.length;
    return { items: await Promise.all(items.map((state) => this.toPublic(state))), next_page_id: more && last ? encodePageId({ k: last.created_at, i: last.id }) : null };
  }

  async get(conversationId: string, callbackId: string): Promise<Callback> {
    return this.toPublic(this.worker(conversationId, callbackId).state);
  }

  /** Remove a subscription; resolves once its deliveries have stopped (an attempt in flight is aborted). */
  async delete(conversationId: string, callbackId: string): Promise<void> {
    const worker = this.worker(conversationId, callbackId);
    if (worker.state.origin === 'server') {
      throw new ConflictError('callback_managed_by_server', 'This callback comes from AGENTD_WEBHOOK_URLS and applies to every conversation: change the server configuration to remove it.', { id: callbackId });
    }
    await this.removeSubscription(callbackId);
  }

  async enable(conversationId: string, callbackId: string): Promise<Callback> {
    const worker = this.worker(conversationId, callbackId);
    worker.enable();
    return this.toPublic(worker.state);
  }

  async deliveries(conversationId: string, callbackId: string, query: { pageId?: string | undefined; limit: number }): Promise<Page<CallbackDelivery>> {
    const { state } = this.worker(conversationId, callbackId);
    const afterSeq = query.pageId ? decodePageId(query.pageId, isSeqCursor).s : 0;
    const { items, more } = await deliveryPage({ state, store: this.deps.store, log: this.deps.log, afterSeq, limit: query.limit });
    const last = items[items.length - 1];
    return { items, next_page_id: more && last ? encodePageId({ s: last.seq }) : null };
  }

  /** A conversation was deleted: its subscriptions go with it. */
  async removeConversation(conversationId: string): Promise<void> {
    await Promise.all(this.deps.dispatcher.forConversation(conversationId).map((worker) => this.removeSubscription(worker.state.id)));
  }

  async removeSubscription(subscriptionId: string): Promise<void> {
    const stopped = this.deps.dispatcher.remove(subscriptionId);
    this.deps.store.remove(subscriptionId);
    await stopped;
  }

  async toPublic(state: SubscriptionState): Promise<Callback> {
    return {
      id: state.id,
      conversation_id: state.conversation_id,
      owner: this.deps.ownerOf?.(state.conversation_id) ?? null,
      url: redactUrlCredentials(state.url),
      events: state.events,
      has_secret: state.origin === 'server' ? this.deps.serverSecretSet : state.secret !== null,
      origin: state.origin,
      state: state.state,
      failing_since: state.failing_since,
      created_at: state.created_at,
      cursor_seq: state.cursor,
      pending_count: this.deps.conversationExists(state.conversation_id)
        ? await this.deps.log.count(state.conversation_id, { kinds: state.events ?? undefined, afterSeq: state.cursor })
        : 0,
      delivered_count: state.delivered_count,
      failed_attempt_count: state.failed_attempt_count,
      last_delivered_at: state.last_delivered_at,
      last_error: state.last_error,
    };
  }

  private worker(conversationId: string, callbackId: string): DeliveryWorker {
    this.assertConversation(conversationId);
    const worker = this.deps.dispatcher.get(callbackId);
    if (!worker || worker.state.conversation_id !== conversationId) throw new NotFoundError('callback', callbackId);
    return worker;
  }

  private assertConversation(conversationId: string): void {
    if (!this.deps.conversationExists(conversationId)) throw new NotFoundError('conversation', conversationId);
  }
}

function compareKeys(state: SubscriptionState, createdAt: string, id: string): number {
  if (state.created_at !== createdAt) return state.created_at < createdAt ? -1 : 1;
  return state.id === id ? 0 : state.id < id ? -1 : 1;
}
