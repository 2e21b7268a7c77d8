import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../../config.js';
import { FileConversationRepository } from '../files/file-conversation-repository.js';
import { FileEventLog } from '../files/event-log/file-event-log.js';
import { FileRunStore } from '../files/file-run-store.js';
import { FileSummaryStore } from '../files/file-summary-store.js';
import { FileWebhookStore } from '../files/file-webhook-store.js';
import { FileScheduleStore } from '../files/file-schedule-store.js';
import { randomUUID } from 'node:crypto';
import type { DamagedDataError } from '../../core/errors.js';
import type { Storage } from './storage.js';
import type { SecretBox } from '../../core/secrets/secret-box.js';
import type { ConversationStore } from '../../core/conversations/conversation-store.js';

export type { PostgresStorage, Storage, StorageCheck } from './storage.js';

export async function createStorage(options: {
  config: Config;
  logger: Logger;
  box: SecretBox;
  storageError: (error: unknown) => unknown;
  onDamaged: (conversationId: string, error: DamagedDataError) => void;
}): Promise<Storage> {
  const { config, logger, box, storageError } = options;
  // The PostgreSQL client, the NATS client and the cluster's stores load only for a cluster.
  if (config.cluster) return (await import('../postgres/index.js')).createPostgres(config.cluster, logger, box);
  const conversationsDir = path.join(config.dataDir, 'conversations');
  const log = new FileEventLog({ conversationsDir, firehoseFile: path.join(config.dataDir, 'firehose.idx'), fsync: config.fsync, storageError, onDamaged: options.onDamaged });
  const repository = new FileConversationRepository(conversationsDir, box, { fsync: config.fsync, storageError, snapshotFile: path.join(config.dataDir, 'conversations.snapshot'), workdirBase: config.workdirBase });
  const runs = new FileRunStore(conversationsDir, { storageError, onDamaged: options.onDamaged });
  const schedules = new FileScheduleStore(path.join(config.dataDir, 'schedules'), { fsync: config.fsync });
  for (const { id, damage, path: file } of schedules.damaged()) {
    logger.error({ schedule_id: id, file, line: damage.line }, `schedule quarantined: ${file}: ${damage.reason}; it does not fire, its files are kept as found, the other schedules are served`);
  }
  return {
    kind: 'files',
    log,
    runs,
    repository,
    summaries: new FileSummaryStore(path.join(config.dataDir, 'summaries.json'), { fsync: config.fsync }),
    webhooks: new FileWebhookStore({ dir: path.join(config.dataDir, 'webhooks'), box, fsync: config.fsync, storageError }),
    schedules,
    instanceId: randomUUID(),
    // Appends and saves are synchronous; a DELETE awaits its conversation's removal itself.
    durable: async () => {},
    checks: async () => ({}),
    unavailable: () => null,
    postgres: null,
    close: async () => {
      runs.close();
      await log.close();
    },
  };
}

/**
 * The next start reads no logs: each conversation's summary is saved once nothing appends any more;
 * and (files) no record file: the records in one snapshot, with the summaries (then summaries.json
 * only names that snapshot).
 */
export async function saveForNextStart({ store, storage, logger }: { store: ConversationStore; storage: Storage; logger: Logger }): Promise<void> {
  const held = store.summaries();
  const inSnapshot = await storage.repository.saveSnapshot?.(store.all(), held).catch((error: unknown) => {
    logger.warn({ err: error }, 'conversation records snapshot not saved: the next start reads each record');
    return undefined;
  });
  await storage.summaries.save(held, inSnapshot === undefined ? {} : { inSnapshot }).catch((error: unknown) => logger.warn({ err: error }, 'conversation summaries not saved: the next start reads each log'));
}
