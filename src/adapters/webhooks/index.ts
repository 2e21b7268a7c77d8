import type { Damage } from '../../core/errors.js';
import type { Logger } from 'pino';
import type { Config } from '../../config.js';
import { UndiciWebhookClient } from './undici-webhook-client.js';
import type { ConversationStore } from '../../core/conversations/conversation-store.js';
import type { EventLog } from '../../core/events/event-log.js';
import type { SubscriptionState, WebhookStore } from '../../core/webhooks/subscription-state.js';
import { CallbackService } from '../../core/webhooks/callback-service.js';
import { systemScheduler, type Scheduler } from '../../core/webhooks/scheduler.js';
import { ServerCallbacks } from '../../core/webhooks/server-callbacks.js';
import type { WebhookTargets } from '../../core/webhooks/webhook-targets.js';
import { WebhookDispatcher } from '../../core/webhooks/webhook-dispatcher.js';

export interface Webhooks {
  callbacks: CallbackService;
  /** Callbacks whose stored state is damaged (left out at load). */
  damaged(): { id: string; damage: Damage }[];
  /** This instance took a conversation over: deliver its subscriptions (as stored now) from here. */
  adopt(states: readonly SubscriptionState[]): void;
  /** This instance lost a conversation's lease: stop delivering its subscriptions (their state stays stored). */
  release(conversationId: string): Promise<void>;
  /** Stops every delivery worker (attempts in flight are aborted, not counted) and saves the cursors. */
  close(): Promise<void>;
}

/**
 * Webhook delivery, wired: subscriptions in `<dataDir>/webhooks`, one shared undici Agent, one
 * worker per subscription reading the event log after its own cursor. A subscription to the log's
 * firehose is only a wake-up; what is delivered always comes from the log.
 */
export async function createWebhooks(options: {
  config: Config;
  logger: Logger;
  log: EventLog;
  conversations: ConversationStore;
  /** Where subscriptions and delivery logs persist (the data dir's files, or PostgreSQL). */
  store: WebhookStore & { damaged(): { id: string; damage: Damage; path: string }[] };
  version: string;
  /** The address policy every outgoing request of the server follows (webhooks, hooks, MCP). */
  targets: WebhookTargets;
  scheduler?: Scheduler;
  /**
   * Several instances: whether this one holds a conversation's lease. Only the holder delivers
   * its subscriptions (none start at start-up; `adopt` starts them when a lease is taken).
   */
  owns?: (conversationId: string) => boolean;
}): Promise<Webhooks> {
  const { config, logger, log, conversations } = options;
  const settings = config.webhooks;
  const scheduler = options.scheduler ?? systemScheduler;
  const { store } = options;
  const { targets } = options;
  const client = new UndiciWebhookClient({ timeoutMs: settings.timeoutMs, targets });
  const bindings = (state: { id: string; conversation_id: string }) => ({ conversation_id: state.conversation_id, callback_id: state.id });
  const dispatcher = new WebhookDispatcher({
    log,
    store,
    client,
    scheduler,
    policy: { baseMs: settings.retryBaseMs, maxMs: settings.retryMaxMs, windowMs: settings.retryWindowMs },
    userAgent: `agentd/${options.version}`,
    conversationExists: (id) => conversations.has(id),
    secretOf: (state) => (state.origin === 'server' ? settings.secret : state.secret),
    onOrphaned: (state) => void callbacks.removeSubscription(state.id),
    onFailing: (state) => logger.warn({ ...bindings(state), last_error: state.last_error }, 'callback retries ran out: marked failing until enabled'),
    onError: (error, state) => logger.error({ err: error, ...bindings(state) }, 'callback delivery error'),
  });
  const callbacks = new CallbackService({ store, dispatcher, log, conversationExists: (id) => conversations.has(id), ownerOf: (id) => (conversations.has(id) ? (conversations.find(id).owner ?? null) : null), clock: scheduler, serverSecretSet: settings.secret !== null, targets });
  const serverCallbacks = new ServerCallbacks({ urls: settings.urls, store, dispatcher, log, clock: scheduler, conversationIds: () => [...conversations.all()].map((record) => record.id) });

  const owns = options.owns;
  const loaded = owns ? [] : store.loadAll();
  for (const { id, damage, path: file } of store.damaged()) {
    logger.error({ callback_id: id, file, line: damage.line }, `callback quarantined: ${file}: ${damage.reason}; its files are kept as found`);
  }
  callbacks.start(loaded, (state) => serverCallbacks.keeps(state));
  if (!owns) await serverCallbacks.reconcile(loaded);
  // Every event from now on, of every conversation: the wake-up of its delivery workers.
  const wakeUps = log.subscribe({ conversationId: null, after: await log.globalHead() });
  const reading = (async () => {
    try {
      for await (const item of wakeUps) {
        if (item.type !== 'event') continue;
        const { event } = item.stored;
        if (owns && !owns(event.conversation_id)) continue;
        try {
          serverCallbacks.onAppend(event.conversation_id, event.seq);
          dispatcher.notify(event.conversation_id);
        } catch (error) {
          logger.error({ err: error, conversation_id: event.conversation_id }, 'could not schedule callback deliveries');
        }
      }
    } catch (error) {
      logger.error({ err: error }, 'webhook wake-ups stopped');
    }
  })();

  return {
    callbacks,
    damaged: () => store.damaged().map(({ id, damage }) => ({ id, damage })),
    adopt(states) {
      for (const state of states) if (!dispatcher.get(state.id) && serverCallbacks.keeps(state)) dispatcher.add(state);
    },
    async release(conversationId) {
      await Promise.all(dispatcher.forConversation(conversationId).map((worker) => dispatcher.remove(worker.state.id)));
    },
    async close() {
      wakeUps.close();
      await reading;
      await dispatcher.close();
      await client.close();
    },
  };
}
