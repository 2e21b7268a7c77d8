import type { Damage } from './core/errors.js';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { FileWebhookStore } from './adapters/file-webhook-store.js';
import { UndiciWebhookClient } from './adapters/undici-webhook-client.js';
import type { ConversationStore } from './core/conversations/conversation-store.js';
import type { EventLog } from './core/events/event-log.js';
import type { SecretBox } from './core/secrets/secret-box.js';
import { CallbackService } from './core/webhooks/callback-service.js';
import { systemScheduler, type Scheduler } from './core/webhooks/scheduler.js';
import { ServerCallbacks } from './core/webhooks/server-callbacks.js';
import { WebhookTargets } from './core/webhooks/webhook-targets.js';
import { WebhookDispatcher } from './core/webhooks/webhook-dispatcher.js';

export interface Webhooks {
  callbacks: CallbackService;
  /** Callbacks whose stored state is damaged (left out at load). */
  damaged(): { id: string; damage: Damage }[];
  /** Wraps the agent runtime so that deleting a conversation also removes its callbacks. */
  /** Stops every delivery worker (attempts in flight are aborted, not counted) and saves the cursors. */
  close(): Promise<void>;
}

/**
 * Webhook delivery, wired: subscriptions in `<dataDir>/webhooks`, one shared undici Agent, one
 * worker per subscription reading the event log after its own cursor. A subscription to the log's
 * firehose is only a wake-up; what is delivered always comes from the log.
 */
export async function composeWebhooks(options: {
  config: Config;
  logger: Logger;
  log: EventLog;
  conversations: ConversationStore;
  box: SecretBox;
  version: string;
  scheduler?: Scheduler;
  storageError?: (error: unknown) => unknown;
}): Promise<Webhooks> {
  const { config, logger, log, conversations } = options;
  const settings = config.webhooks;
  const scheduler = options.scheduler ?? systemScheduler;
  const store = new FileWebhookStore({ dir: path.join(config.dataDir, 'webhooks'), box: options.box, fsync: config.fsync, ...(options.storageError && { storageError: options.storageError }) });
  const targets = new WebhookTargets({ allowPrivate: settings.allowPrivate, allowCidrs: settings.allowCidrs });
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
  const callbacks = new CallbackService({ store, dispatcher, log, conversationExists: (id) => conversations.has(id), clock: scheduler, serverSecretSet: settings.secret !== null, targets });
  const serverCallbacks = new ServerCallbacks({ urls: settings.urls, store, dispatcher, log, clock: scheduler, conversationIds: () => [...conversations.all()].map((record) => record.id) });

  const loaded = store.loadAll();
  for (const { id, damage, path: file } of store.damaged()) {
    logger.error({ callback_id: id, file, line: damage.line }, `callback quarantined: ${file}: ${damage.reason}; its files are kept as found`);
  }
  callbacks.start(loaded, (state) => serverCallbacks.keeps(state));
  await serverCallbacks.reconcile(loaded);
  // Every event from now on, of every conversation: the wake-up of its delivery workers.
  const wakeUps = log.subscribe({ conversationId: null, after: await log.globalHead() });
  const reading = (async () => {
    try {
      for await (const item of wakeUps) {
        if (item.type !== 'event') continue;
        const { event } = item.stored;
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
    async close() {
      wakeUps.close();
      await reading;
      await dispatcher.close();
      await client.close();
    },
  };
}
