import { isoTimestamp, type Clock } from '../clock.js';
import type { EventLog } from '../events/event-log.js';
import { normalizeCallbackUrl } from './callback-url.js';
import { newSubscriptionState, type SubscriptionState, type WebhookStore } from './subscription-state.js';
import type { WebhookDispatcher } from './webhook-dispatcher.js';

export interface ServerCallbacksDeps {
  /** AGENTD_WEBHOOK_URLS. */
  urls: readonly string[];
  store: WebhookStore;
  dispatcher: WebhookDispatcher;
  log: Pick<EventLog, 'lastSeq'>;
  clock: Clock;
  conversationIds(): Iterable<string>;
}

/**
 * Server-wide callbacks (AGENTD_WEBHOOK_URLS) as ordinary subscriptions, one per (URL, conversation),
 * with `origin: 'server'` and no stored secret (AGENTD_WEBHOOK_SECRET signs them). Each has its own
 * persisted cursor, retries, delivery log and `enable`, exactly like an API callback, and one
 * conversation's failures never hold up another's.
 *
 * A conversation gets its subscription with its first event since start-up (cursor just before that
 * event). At start-up, a conversation that has events but no subscription for a URL gets one: from
 * its first event if the URL was already configured before (nothing was ever sent: a crash came
 * between the event and the subscription), or after its last event if the URL is new (a URL
 * receives what happens from when it is configured, not the whole history). Subscriptions of a URL
 * no longer configured are removed at start-up.
 */
export class ServerCallbacks {
  private readonly urls: readonly string[];

  constructor(private readonly deps: ServerCallbacksDeps) {
    this.urls = [...new Set(deps.urls.map(normalizeCallbackUrl))];
  }

  /** Whether a persisted subscription still applies (API callbacks always do). */
  keeps(state: SubscriptionState): boolean {
    return state.origin !== 'server' || this.urls.includes(state.url);
  }

  /** After the persisted subscriptions were started: fill in the missing ones. */
  async reconcile(loaded: readonly SubscriptionState[]): Promise<void> {
    if (this.urls.length === 0) return;
    const known = new Set(loaded.filter((state) => state.origin === 'server').map((state) => state.url));
    for (const conversationId of [...this.deps.conversationIds()]) {
      const missing = this.missingUrls(conversationId);
      if (missing.length === 0) continue;
      const lastSeq = await this.deps.log.lastSeq(conversationId);
      if (lastSeq === 0) continue;
      for (const url of missing) this.create(conversationId, url, known.has(url) ? 0 : lastSeq);
    }
  }

  /** An event was appended (synchronously, right after it reached the log). */
  onAppend(conversationId: string, seq: number): void {
    if (this.urls.length === 0) return;
    for (const url of this.missingUrls(conversationId)) this.create(conversationId, url, seq - 1);
  }

  private missingUrls(conversationId: string): string[] {
    const workers = this.deps.dispatcher.forConversation(conversationId);
    return this.urls.filter((url) => !workers.some((worker) => worker.state.origin === 'server' && worker.state.url === url));
  }

  private create(conversationId: string, url: string, cursor: number): void {
    const state = newSubscriptionState({ conversationId, url, events: null, secret: null, origin: 'server', cursor, createdAt: isoTimestamp(this.deps.clock.now()) });
    this.deps.store.save(state);
    this.deps.dispatcher.add(state);
  }
}
