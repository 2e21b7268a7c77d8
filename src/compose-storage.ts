import { randomUUID } from 'node:crypto';
import path from 'node:path';
import postgres, { type Sql } from 'postgres';
import type { Logger } from 'pino';
import type { Config } from './config.js';
import { FileConversationRepository } from './adapters/file-conversation-repository.js';
import { FileEventLog } from './adapters/file-event-log/file-event-log.js';
import { FileRunStore } from './adapters/file-run-store.js';
import { FileSummaryStore } from './adapters/file-summary-store.js';
import { FileWebhookStore } from './adapters/file-webhook-store.js';
import { JetStreamEventFeed } from './adapters/cluster/jetstream-event-feed.js';
import { PgNotifyEventFeed } from './adapters/cluster/pg-notify-event-feed.js';
import type { EventFeed } from './adapters/cluster/event-feed.js';
import { clusterId, migrate } from './adapters/postgres/migrations.js';
import { PgConversationRepository } from './adapters/postgres/pg-conversation-repository.js';
import { PgEventLog } from './adapters/postgres/pg-event-log.js';
import { LeaseLostError, type Fence } from './adapters/postgres/pg-event-store.js';
import { PgLeases } from './adapters/postgres/pg-leases.js';
import { PgRunStore } from './adapters/postgres/pg-run-store.js';
import { PgSummaryStore } from './adapters/postgres/pg-summary-store.js';
import { PgWebhookStore } from './adapters/postgres/pg-webhook-store.js';
import { WritePipeline } from './adapters/postgres/write-pipeline.js';
import type { RunStore } from './core/agent/run-record.js';
import type { ConversationRepository } from './core/conversations/conversation-record.js';
import type { SummaryStore } from './core/conversations/summary-store.js';
import type { DamagedDataError, Damage } from './core/errors.js';
import type { EventLog } from './core/events/event-log.js';
import type { SecretBox } from './core/secrets/secret-box.js';
import type { WebhookStore } from './core/webhooks/subscription-state.js';

export interface StorageCheck {
  ok: boolean;
  detail: string | null;
}

/** Where everything persists: the data dir's files, or PostgreSQL (AGENTD_DATABASE_URL). */
export interface Storage {
  kind: 'files' | 'postgres';
  log: EventLog;
  runs: RunStore;
  repository: ConversationRepository;
  summaries: SummaryStore;
  webhooks: WebhookStore & { damaged(): { id: string; damage: Damage; path: string }[] };
  /** Resolves once every write made so far is durable (at once for files: their writes are synchronous). */
  durable(): Promise<void>;
  /** The database and the feed, for /health (empty on files). */
  checks(): Promise<Record<string, StorageCheck>>;
  /** Set on PostgreSQL: what the cluster layer needs. */
  postgres: PostgresStorage | null;
  close(): Promise<void>;
}

export interface PostgresStorage {
  sql: Sql;
  log: PgEventLog;
  runs: PgRunStore;
  repository: PgConversationRepository;
  writes: WritePipeline;
  feed: EventFeed | null;
  webhooks: PgWebhookStore;
  leases: PgLeases;
  /** This process's id in the leases and the instance registry. */
  instanceId: string;
  /** The fence of each conversation this instance holds (set by the ownership layer). */
  fences: Map<string, Fence>;
  /** Told when an append claimed a new conversation's lease. */
  onClaim(listener: (conversationId: string) => void): void;
}

export async function composeStorage(options: {
  config: Config;
  logger: Logger;
  box: SecretBox;
  storageError: (error: unknown) => unknown;
  onDamaged: (conversationId: string, error: DamagedDataError) => void;
}): Promise<Storage> {
  const { config, logger, box, storageError } = options;
  if (config.cluster) return composePostgres(config.cluster, logger, box);
  const conversationsDir = path.join(config.dataDir, 'conversations');
  const log = new FileEventLog({ conversationsDir, firehoseFile: path.join(config.dataDir, 'firehose.idx'), fsync: config.fsync, storageError, onDamaged: options.onDamaged });
  const repository = new FileConversationRepository(conversationsDir, box, { fsync: config.fsync, storageError });
  return {
    kind: 'files',
    log,
    runs: new FileRunStore(conversationsDir, { storageError }),
    repository,
    summaries: new FileSummaryStore(path.join(config.dataDir, 'summaries.json')),
    webhooks: new FileWebhookStore({ dir: path.join(config.dataDir, 'webhooks'), box, fsync: config.fsync, storageError }),
    // Appends and saves are synchronous; a DELETE awaits its conversation's removal itself.
    durable: async () => {},
    checks: async () => ({}),
    postgres: null,
    close: () => log.close(),
  };
}

async function composePostgres(cluster: NonNullable<Config['cluster']>, logger: Logger, box: SecretBox): Promise<Storage> {
  // A process stalled inside a transaction (stopped, swapped out) would hold the lease row it
  // checked and keep a takeover waiting: the database ends such a transaction after a while.
  const sql = postgres(cluster.databaseUrl, {
    max: 10,
    onnotice: () => {},
    connect_timeout: 10,
    connection: { application_name: 'agentd', idle_in_transaction_session_timeout: Math.max(10_000, cluster.leaseTtlMs * 2) },
  });
  const applied = await migrate(sql);
  if (applied.length > 0) logger.info({ versions: applied }, 'database migrations applied');
  const feed: EventFeed = cluster.natsUrl ? await JetStreamEventFeed.connect(cluster.natsUrl, { cluster: await clusterId(sql) }) : new PgNotifyEventFeed(sql);
  const fences = new Map<string, Fence>();
  // Each process is a new instance: leases of a previous process expire and are taken over.
  const instanceId = randomUUID();
  const onError = (error: unknown) => logger.warn({ err: error }, 'database or event feed error (retried)');
  const log = await PgEventLog.open({ sql, feed, fenceOf: (id) => fences.get(id) ?? claim(id), onError });
  const leases = new PgLeases(sql);
  // A conversation nobody ever held (a new one) is claimed by its first append; any other
  // conversation is appended to only under the lease the ownership layer took.
  const claim = async (id: string): Promise<Fence> => {
    const lease = await leases.claimNew(id, instanceId, cluster.leaseTtlMs);
    if (!lease) throw new LeaseLostError(id);
    const fence = { owner: instanceId, token: lease.token };
    fences.set(id, fence);
    onClaim(id);
    return fence;
  };
  let onClaim: (id: string) => void = () => {};
  const writes = new WritePipeline({ onError });
  const runs = new PgRunStore(sql, writes, instanceId);
  await runs.preload();
  const repository = new PgConversationRepository(sql, box, writes, instanceId);
  const webhooks = new PgWebhookStore(sql, box, writes);
  await webhooks.preload();
  return {
    kind: 'postgres',
    log,
    runs,
    repository,
    summaries: new PgSummaryStore(sql),
    webhooks,
    durable: () => writes.settled(),
    checks: async () => ({
      database: await check(async () => void (await sql`SELECT 1`)),
      ...(cluster.natsUrl && { nats: await check(async () => feed.ping?.()) }),
    }),
    postgres: { sql, log, runs, repository, webhooks, writes, feed, fences, leases, instanceId, onClaim: (listener) => (onClaim = listener) },
    async close() {
      await writes.close();
      await log.close();
      await sql.end({ timeout: 5 });
    },
  };
}

async function check(probe: () => Promise<unknown>): Promise<StorageCheck> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([probe(), new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('no answer within 2 s')), 2000)))]);
    return { ok: true, detail: null };
  } catch (error) {
    return { ok: false, detail: (error as Error).message };
  } finally {
    clearTimeout(timer);
  }
}
