import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import type { Logger } from 'pino';
import type { Config } from '../../config.js';
import { JetStreamEventFeed } from '../cluster/jetstream-event-feed.js';
import { PgNotifyEventFeed } from '../cluster/pg-notify-event-feed.js';
import type { EventFeed } from '../cluster/event-feed.js';
import { NoticeSeal } from '../cluster/notice-seal.js';
import { asDatabaseUnavailable } from './connection-errors.js';
import { clusterId, migrate } from './migrations.js';
import { PgConversationRepository } from './pg-conversation-repository.js';
import { PgEventLog } from './pg-event-log.js';
import { LeaseLostError, type Fence } from './pg-event-store.js';
import { PgLeases } from './pg-leases.js';
import { PgRunStore } from './pg-run-store.js';
import { PgSummaryStore } from './pg-summary-store.js';
import { PgWebhookStore } from './pg-webhook-store.js';
import { PgScheduleStore } from './pg-schedule-store.js';
import { WritePipeline } from './write-pipeline.js';
import type { SecretBox } from '../../core/secrets/secret-box.js';
import type { Storage, StorageCheck } from '../storage/storage.js';

/** Storage on PostgreSQL (several instances): loaded by adapters/storage/index.ts only when a database is configured. */
export async function createPostgres(cluster: NonNullable<Config['cluster']>, logger: Logger, box: SecretBox): Promise<Storage> {
  // A process stalled inside a transaction (stopped, swapped out) would hold the lease row it
  // checked and keep a takeover waiting: the database ends such a transaction after a while.
  const sql = postgres(cluster.databaseUrl, {
    max: 10,
    onnotice: () => {},
    connect_timeout: 5,
    // The driver's own backoff grows to many seconds while the database is down, and queries wait it out before failing: kept short, a request is refused at once.
    backoff: () => 0.25,
    connection: { application_name: 'agentd', idle_in_transaction_session_timeout: Math.max(10_000, cluster.leaseTtlMs * 2) },
  });
  const applied = await migrate(sql);
  if (applied.length > 0) logger.info({ versions: applied }, 'database migrations applied');
  // Notices are signed with a key derived from the shared AGENTD_SECRET_KEY; one that does not verify is dropped, and said once.
  const seal = new NoticeSeal(box.deriveKey('cluster notices'));
  let forged = 0;
  const onForged = () => {
    if (forged++ === 0) logger.warn({ feed: cluster.natsUrl ? 'nats' : 'postgres' }, 'dropped an event notice that does not verify: a process without AGENTD_SECRET_KEY is publishing to the feed');
  };
  const feed: EventFeed = cluster.natsUrl ? await JetStreamEventFeed.connect({ url: cluster.natsUrl, credsFile: cluster.natsCreds, tlsCaFile: cluster.natsTlsCa }, { cluster: await clusterId(sql), seal, onForged }) : new PgNotifyEventFeed(sql, seal, onForged);
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
    schedules: new PgScheduleStore(sql, { leaseMs: cluster.leaseTtlMs }),
    instanceId,
    durable: () => writes.settled(),
    checks: async () => ({
      database: await check(async () => void (await sql`SELECT 1`)),
      ...(cluster.natsUrl && { nats: await check(async () => feed.ping?.()) }),
    }),
    unavailable: asDatabaseUnavailable,
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
