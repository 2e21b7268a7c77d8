/**
 * The shared EventLog contract against PostgreSQL: live through LISTEN/NOTIFY, and through NATS
 * JetStream when nats-server is installed. Each test gets a fresh database on one throwaway
 * cluster started in this file's temp dir.
 */
import postgres, { type Sql } from 'postgres';
import { afterAll, beforeAll, describe } from 'vitest';
import { JetStreamEventFeed } from '../../src/adapters/cluster/jetstream-event-feed.js';
import { PgNotifyEventFeed } from '../../src/adapters/cluster/pg-notify-event-feed.js';
import { clusterId, migrate } from '../../src/adapters/postgres/migrations.js';
import { PgEventLog } from '../../src/adapters/postgres/pg-event-log.js';
import type { EventLog } from '../../src/core/events/event-log.js';
import { eventLogContract } from '../contract/event-log-contract.js';
import { findNatsServer, startNatsServer, type NatsServer } from '../support/nats-server.js';
import { findPostgres, startPostgres, type PostgresCluster } from '../support/postgres-cluster.js';
import { NoticeSeal } from '../../src/adapters/cluster/notice-seal.js';

/** The key every instance of one cluster derives from its shared AGENTD_SECRET_KEY. */
const SEAL = new NoticeSeal(Buffer.alloc(32, 7));

const pg = findPostgres();
const nats = findNatsServer();
const pgMissing = 'missing' in pg ? pg.missing : null;
const natsMissing = 'missing' in nats ? nats.missing : null;
if (pgMissing) console.warn(`test/cluster/pg-event-log-contract.test.ts: skipped (${pgMissing})`);
else if (natsMissing) console.warn(`test/cluster/pg-event-log-contract.test.ts: NATS variant skipped (${natsMissing})`);

let cluster: PostgresCluster | null = null;
let natsServer: NatsServer | null = null;

beforeAll(async () => {
  if (pgMissing) return;
  cluster = await startPostgres(pg as Exclude<typeof pg, { missing: string }>);
  if (!natsMissing) natsServer = await startNatsServer((nats as { path: string }).path);
}, 60_000);

afterAll(async () => {
  await natsServer?.stop();
  await cluster?.stop();
}, 60_000);

/** A subject whose logs share one database per test; `withNats` picks the live feed. */
function subject(withNats: boolean) {
  let url = '';
  const pools = new Set<Sql>();
  const open = async (): Promise<EventLog> => {
    const sql = postgres(url, { max: 8, onnotice: () => {} });
    pools.add(sql);
    await migrate(sql);
    const feed = withNats ? await JetStreamEventFeed.connect({ url: natsServer!.url }, { cluster: await clusterId(sql), seal: SEAL }) : new PgNotifyEventFeed(sql, SEAL);
    return PgEventLog.open({ sql, feed });
  };
  return {
    open: async () => {
      url = await cluster!.createDatabase();
      return open();
    },
    reopen: async (log: EventLog) => {
      await log.close();
      return open();
    },
    cleanup: async () => {
      await Promise.all([...pools].map((sql) => sql.end({ timeout: 5 })));
      pools.clear();
    },
  };
}

describe.skipIf(pgMissing !== null)('PostgreSQL event log', () => {
  eventLogContract('postgres (LISTEN/NOTIFY)', subject(false));
});

describe.skipIf(pgMissing !== null || natsMissing !== null)('PostgreSQL event log with NATS', () => {
  eventLogContract('postgres + NATS JetStream', subject(true));
});
