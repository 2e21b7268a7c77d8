import { randomUUID } from 'node:crypto';
import path from 'node:path';
import postgres, { type Sql } from 'postgres';
import { FileEventLog } from '../src/adapters/files/event-log/file-event-log.js';
import { JetStreamEventFeed } from '../src/adapters/cluster/jetstream-event-feed.js';
import { PgNotifyEventFeed } from '../src/adapters/cluster/pg-notify-event-feed.js';
import { clusterId, migrate } from '../src/adapters/postgres/migrations.js';
import { PgEventLog } from '../src/adapters/postgres/pg-event-log.js';
import type { EventLog } from '../src/core/events/event-log.js';
import type { NewEvent } from '../src/core/schemas/event.js';
import { findNatsServer, startNatsServer, type NatsServer } from '../test/support/nats-server.js';
import { findPostgres, startPostgres, type PostgresCluster } from '../test/support/postgres-cluster.js';
import type { Benchmark } from './support/benchmark.js';
import { measureServers } from './p17-cluster-servers.js';
import { fmt, ratio, summarize } from './support/stats.js';
import { NoticeSeal } from '../src/adapters/cluster/notice-seal.js';

/** The key every instance of one cluster derives from its shared AGENTD_SECRET_KEY. */
const SEAL = new NoticeSeal(Buffer.alloc(32, 7));

const message = (i: number): NewEvent => ({ kind: 'message', source: 'user', role: 'user', content: `benchmark message ${i} ${'x'.repeat(200)}` });

/**
 * P17: the event log shared by several instances. Append throughput (many conversations,
 * concurrent appends) and fan-out latency (append call → a live subscriber on an instance that
 * did not append) for the file log, PostgreSQL with one instance, and PostgreSQL with three
 * instances (each its own connection pool, feed and tail, in this one process) over
 * LISTEN/NOTIFY and over NATS JetStream; then the same through real agentd processes over HTTP
 * (p17-cluster-servers.ts): one on files, one on PostgreSQL, three on one database.
 */
export const p17ClusterLog: Benchmark = {
  id: 'P17',
  title: 'event log across instances',
  measures: 'append throughput and fan-out latency of the file log versus PostgreSQL with 1 and 3 instances (LISTEN/NOTIFY, NATS JetStream), in one process and as real agentd processes over HTTP.',
  async run({ quick, tmp }) {
    const pg = findPostgres();
    if ('missing' in pg) return { sizes: '', tables: [], notes: [], skipped: pg.missing };
    const natsFound = findNatsServer();
    const appends = quick ? 300 : 10_000;
    const fanouts = quick ? 50 : 1_000;
    const conversations = 20;
    const concurrency = 16;
    let cluster: PostgresCluster | null = null;
    let nats: NatsServer | null = null;
    const pools: Sql[] = [];
    try {
      // Started together (nothing is measured yet); whichever started is stopped below if the other failed.
      const [pgStarted, natsStarted] = await Promise.allSettled([startPostgres(pg), 'missing' in natsFound ? Promise.resolve(null) : startNatsServer(natsFound.path)]);
      if (pgStarted.status === 'fulfilled') cluster = pgStarted.value;
      if (natsStarted.status === 'fulfilled') nats = natsStarted.value;
      if (pgStarted.status === 'rejected') throw pgStarted.reason;
      if (natsStarted.status === 'rejected') throw natsStarted.reason;
      const openPg = async (url: string, count: number, feed: 'notify' | 'nats'): Promise<EventLog[]> => {
        const logs: EventLog[] = [];
        for (let i = 0; i < count; i++) {
          const sql = postgres(url, { max: 8, onnotice: () => {} });
          pools.push(sql);
          await migrate(sql);
          logs.push(await PgEventLog.open({ sql, feed: feed === 'nats' ? await JetStreamEventFeed.connect({ url: nats!.url }, { cluster: await clusterId(sql), seal: SEAL }) : new PgNotifyEventFeed(sql, SEAL), pollMs: 1000 }));
        }
        return logs;
      };
      const all: { label: string; open: () => Promise<EventLog[]> }[] = [
        { label: 'file log (1 process)', open: async () => [new FileEventLog({ conversationsDir: path.join(tmp, 'conversations'), firehoseFile: path.join(tmp, 'firehose.idx') })] },
        { label: 'PostgreSQL, 1 instance', open: async () => openPg(await cluster!.createDatabase(), 1, 'notify') },
        { label: 'PostgreSQL, 3 instances, LISTEN/NOTIFY', open: async () => openPg(await cluster!.createDatabase(), 3, 'notify') },
        ...(nats ? [{ label: 'PostgreSQL, 3 instances, NATS JetStream', open: async () => openPg(await cluster!.createDatabase(), 3, 'nats') }] : []),
      ];
      // --quick: the baseline and the last setup, as for the servers below (each setup took 1.5-2 s here).
      const setups = quick ? [all[0]!, all.at(-1)!] : all;
      const rows: string[][] = [];
      let fileRate = 0;
      let fileP50 = 0;
      for (const setup of setups) {
        const logs = await setup.open();
        const ids = Array.from({ length: conversations }, () => randomUUID());
        // Throughput: `concurrency` clients, spread over the instances, each appending to its conversations.
        let next = 0;
        const started = performance.now();
        await Promise.all(
          Array.from({ length: concurrency }, async (_, client) => {
            const log = logs[client % logs.length]!;
            for (let i = next++; i < appends; i = next++) await log.append(ids[i % conversations]!, message(i));
          }),
        );
        const rate = appends / ((performance.now() - started) / 1000);
        // Fan-out: appended on the first instance, received live by a subscriber on the last one.
        const id = randomUUID();
        const subscription = logs.at(-1)!.subscribe({ conversationId: id, after: 0 });
        const arrivals = new Map<number, number>();
        const reading = (async () => {
          for await (const item of subscription) {
            if (item.type !== 'event') continue;
            arrivals.set(item.cursor, performance.now());
            if (item.cursor === fanouts) return;
          }
        })();
        const sentAt: number[] = [];
        for (let i = 1; i <= fanouts; i++) {
          sentAt[i] = performance.now();
          await logs[0]!.append(id, message(i));
          // One at a time, as a run appends: the next waits until this one arrived.
          while (!arrivals.has(i)) await new Promise((resolve) => setImmediate(resolve));
        }
        await reading;
        subscription.close();
        const latencies = Array.from({ length: fanouts }, (_, k) => arrivals.get(k + 1)! - sentAt[k + 1]!);
        const latency = summarize(latencies);
        if (rows.length === 0) {
          fileRate = rate;
          fileP50 = latency.p50;
        }
        rows.push([setup.label, fmt(rate), ratio(rate, fileRate), fmt(latency.p50), fmt(latency.p99), ratio(latency.p50, fileP50)]);
        for (const log of logs) await log.close();
      }
      const servers = await measureServers({ quick, tmp, databaseUrl: () => cluster!.createDatabase(), natsUrl: nats?.url ?? null });
      return {
        sizes: `${appends.toLocaleString('en-US')} appends by ${concurrency} concurrent clients over ${conversations} conversations; ${fanouts} fan-out samples, one append at a time`,
        tables: [
          { caption: `the event log, in this process${quick ? `; --quick: ${setups.length} of the ${all.length} setups` : ''}`, columns: ['log', 'appends/s', 'vs file', 'fan-out p50 ms', 'fan-out p99 ms', 'p50 vs file'], rows },
          { caption: servers.caption, columns: servers.columns, rows: servers.rows },
        ],
        notes: [
          'PostgreSQL runs locally with fsync off (a throwaway cluster): the figures show the protocol and the commit-order head row, not disk latency.',
          'With 3 instances the subscriber is on another instance than the appender: its event comes through the feed (inline JSON with NATS, a read of the database after LISTEN/NOTIFY).',
          'The 3 "instances" share this one process (separate pools, feeds and tails) and the 2 shared cores: a ceiling on throughput, not a measure of scaling out.',
          ...servers.notes,
        ],
      };
    } finally {
      await Promise.all(pools.map((sql) => sql.end({ timeout: 5 }).catch(() => {})));
      await nats?.stop();
      await cluster?.stop();
    }
  },
};
