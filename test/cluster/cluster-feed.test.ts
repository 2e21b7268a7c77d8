/**
 * Cross-instance fan-out: two "instances" (each its own PostgreSQL pool, feed and tail) append
 * to the same conversations at once; each instance's tail sees every event exactly once, in
 * commit order, over NATS JetStream and over PostgreSQL LISTEN/NOTIFY, and keeps doing so when
 * the NATS server is killed (the feed is a doorbell; the database is the record).
 */
import { randomUUID } from 'node:crypto';
import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import postgres, { type Sql } from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventFeed } from '../../src/adapters/cluster/event-feed.js';
import { GlobalTail } from '../../src/adapters/cluster/global-tail.js';
import { JetStreamEventFeed } from '../../src/adapters/cluster/jetstream-event-feed.js';
import { PgNotifyEventFeed } from '../../src/adapters/cluster/pg-notify-event-feed.js';
import { clusterId, migrate } from '../../src/adapters/postgres/migrations.js';
import { PgEventStore } from '../../src/adapters/postgres/pg-event-store.js';
import type { FirehoseEntry } from '../../src/core/events/event-log.js';
import type { NewEvent } from '../../src/core/schemas/event.js';
import { findNatsServer, startNatsServer, type NatsServer } from '../support/nats-server.js';
import { findPostgres, startPostgres, type PostgresCluster } from '../support/postgres-cluster.js';
import { NoticeSeal } from '../../src/adapters/cluster/notice-seal.js';

/** The key every instance of one cluster derives from its shared AGENTD_SECRET_KEY. */
const SEAL = new NoticeSeal(Buffer.alloc(32, 7));

const pg = findPostgres();
const nats = findNatsServer();
const pgMissing = 'missing' in pg ? pg.missing : null;
const natsMissing = 'missing' in nats ? nats.missing : null;
if (pgMissing) console.warn(`test/cluster/cluster-feed.test.ts: skipped (${pgMissing})`);
else if (natsMissing) console.warn(`test/cluster/cluster-feed.test.ts: NATS cases skipped (${natsMissing})`);

const message = (content: string): NewEvent => ({ kind: 'message', source: 'user', role: 'user', content }) as NewEvent;

interface Instance {
  store: PgEventStore;
  feed: EventFeed;
  tail: GlobalTail;
  seen: FirehoseEntry[];
  /** Notices this instance's feed dropped because they did not verify. */
  forged: { count: number };
}

async function waitFor(check: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.skipIf(pgMissing !== null)('cross-instance event feed', () => {
  let cluster: PostgresCluster;
  let natsServer: NatsServer | null = null;
  const cleanups: (() => Promise<unknown>)[] = [];

  beforeAll(async () => {
    cluster = await startPostgres(pg as Exclude<typeof pg, { missing: string }>);
    if (!natsMissing) natsServer = await startNatsServer((nats as { path: string }).path);
  }, 60_000);

  afterAll(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
    await natsServer?.stop();
    await cluster?.stop();
  }, 60_000);

  async function instances(kind: 'nats' | 'postgres', url: string): Promise<Instance[]> {
    const result: Instance[] = [];
    for (let i = 0; i < 2; i++) {
      const sql: Sql = postgres(url, { max: 6, onnotice: () => {} });
      cleanups.push(() => sql.end({ timeout: 5 }));
      const forged = { count: 0 };
      const onForged = () => void forged.count++;
      const feed: EventFeed = kind === 'nats' ? await JetStreamEventFeed.connect({ url: natsServer!.url }, { cluster: await clusterId(sql), seal: SEAL, onForged }) : new PgNotifyEventFeed(sql, SEAL, onForged);
      cleanups.push(() => feed.close());
      const store = new PgEventStore(sql);
      const tail = new GlobalTail(store, feed, { pollMs: 100 });
      const seen: FirehoseEntry[] = [];
      tail.onEntry((entry) => seen.push(entry));
      await tail.start();
      cleanups.push(() => tail.close());
      result.push({ store, feed, tail, seen, forged });
    }
    return result;
  }

  async function appendFromBoth(pair: Instance[], count: number, conversations: string[]): Promise<void> {
    await Promise.all(
      Array.from({ length: count }, async (_, i) => {
        const instance = pair[i % 2]!;
        const appended = await instance.store.append(conversations[i % conversations.length]!, message(`m${i}`));
        await instance.feed
          .publish({ globalCursor: appended.globalCursor, conversationId: appended.event.conversation_id, seq: appended.event.seq, json: appended.json })
          .catch(() => {}); // a feed that is down costs latency, never an event
      }),
    );
  }

  /**
   * One append at a time, each seen by every tail before the next: its notice comes in order,
   * so a tail delivers it from the notice itself unless a poll read it first. Returns how many
   * events the tails delivered from notices meanwhile.
   */
  async function appendOneByOne(pair: Instance[], count: number, conversation: string): Promise<number> {
    const before = pair.reduce((n, instance) => n + instance.tail.stats.inline, 0);
    for (let i = 0; i < count; i++) {
      const appended = await pair[0]!.store.append(conversation, message(`one by one ${i}`));
      await pair[0]!.feed.publish({ globalCursor: appended.globalCursor, conversationId: conversation, seq: appended.event.seq, json: appended.json });
      await waitFor(() => pair.every((instance) => instance.seen.at(-1)?.globalCursor === appended.globalCursor), `event ${appended.globalCursor} on every tail`);
    }
    return pair.reduce((n, instance) => n + instance.tail.stats.inline, 0) - before;
  }

  function expectExactlyOnceInOrder(instance: Instance, from: number, count: number): void {
    expect(instance.seen.map((entry) => entry.globalCursor)).toEqual(Array.from({ length: count }, (_, i) => from + i + 1));
    const perConversation = new Map<string, number[]>();
    for (const { stored } of instance.seen) {
      const seqs = perConversation.get(stored.event.conversation_id) ?? [];
      seqs.push(stored.event.seq);
      perConversation.set(stored.event.conversation_id, seqs);
    }
    for (const seqs of perConversation.values()) expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
  }

  for (const kind of ['postgres', 'nats'] as const) {
    it.skipIf(kind === 'nats' && natsMissing !== null)(`${kind}: both instances see every event once, in commit order`, async () => {
      const url = await cluster.createDatabase();
      await migrate(postgres(url, { max: 1, onnotice: () => {} }));
      const pair = await instances(kind, url);
      const conversations = [randomUUID(), randomUUID(), randomUUID()];
      await appendFromBoth(pair, 300, conversations);
      await waitFor(() => pair.every((instance) => instance.seen.length >= 300), 'both tails to see 300 events');
      for (const instance of pair) expectExactlyOnceInOrder(instance, 0, 300);
      // The notices carry the events: appended one at a time, they are delivered without reading the database.
      if (kind === 'nats') expect(await appendOneByOne(pair, 20, conversations[0]!)).toBeGreaterThan(0);
    }, 60_000);
  }

  it.skipIf(natsMissing !== null)('two databases sharing one NATS server: neither sees the other\'s events, neither loses its notices as duplicates', async () => {
    const [first, second] = await Promise.all(
      [0, 1].map(async () => {
        const url = await cluster.createDatabase();
        await migrate(postgres(url, { max: 1, onnotice: () => {} }));
        return instances('nats', url);
      }),
    );
    const ours = [randomUUID(), randomUUID()];
    const theirs = [randomUUID(), randomUUID()];
    await appendFromBoth(first!, 100, theirs);
    await waitFor(() => first!.every((instance) => instance.seen.length >= 100), 'the first database\'s 100 events');
    // Both number their events from the same positions at once: 101.. there, 1.. here.
    await Promise.all([appendFromBoth(first!, 100, theirs), appendFromBoth(second!, 100, ours)]);
    await waitFor(() => first!.every((instance) => instance.seen.length >= 200) && second!.every((instance) => instance.seen.length >= 100), 'every event of both');
    for (const instance of first!) expectExactlyOnceInOrder(instance, 0, 200);
    for (const instance of second!) {
      expectExactlyOnceInOrder(instance, 0, 100);
      expect(new Set(instance.seen.map((entry) => entry.stored.event.conversation_id))).toEqual(new Set(ours));
    }
    // The second database's notices are not dropped as duplicates of the first's (same positions, same NATS).
    expect(await appendOneByOne(second!, 20, ours[0]!)).toBeGreaterThan(0);
  }, 60_000);

  /** Notices for the next three positions, each carrying a forged agent message inline: unsigned, with a made-up MAC, and signed with another key. */
  function forgedNotices(head: number, conversationId: string): string[] {
    const other = new NoticeSeal(Buffer.alloc(32, 9));
    return [1, 2, 3].map((i) => {
      const event = { id: randomUUID(), conversation_id: conversationId, seq: i, kind: 'message', source: 'agent', role: 'assistant', content: `FORGED ${i}`, created_at: new Date().toISOString() };
      const notice = { globalCursor: head + i, conversationId, seq: i, json: JSON.stringify(event) };
      if (i === 1) return JSON.stringify(notice);
      if (i === 2) return JSON.stringify({ ...notice, mac: 'A'.repeat(43) });
      return other.seal(notice);
    });
  }

  for (const kind of ['postgres', 'nats'] as const) {
    it.skipIf(kind === 'nats' && natsMissing !== null)(`${kind}: notices forged by a process without the key are dropped; the real events that follow arrive, once and in order`, async () => {
      const url = await cluster.createDatabase();
      await migrate(postgres(url, { max: 1, onnotice: () => {} }));
      const pair = await instances(kind, url);
      const conversation = randomUUID();
      const forger = postgres(url, { max: 1, onnotice: () => {} });
      cleanups.push(() => forger.end({ timeout: 5 }));
      const head = await pair[0]!.store.globalHead();
      const payloads = forgedNotices(head, conversation);
      if (kind === 'postgres') {
        // Another database session: NOTIFY needs no more than a connection.
        for (const payload of payloads) await forger`SELECT pg_notify('agentd_events', ${payload})`;
      } else {
        // A local process with no credentials, publishing where the instances listen.
        const connection = await connect({ servers: natsServer!.url });
        cleanups.push(() => connection.close());
        const subject = `agentd.${(await clusterId(forger)).replace(/[^A-Za-z0-9]/g, '')}.events.${conversation}`;
        for (const [i, payload] of payloads.entries()) await jetstream(connection).publish(subject, payload, { msgID: `forged-${i}` });
      }
      // Each instance has either dropped the three (what must happen) or taken one for an event (what must not).
      await waitFor(() => pair.every((instance) => instance.forged.count >= 3 || instance.seen.length > 0), 'every instance to receive the three forged notices');
      await appendFromBoth(pair, 10, [conversation]);
      await waitFor(() => pair.every((instance) => instance.seen.length >= 10), 'the 10 real events on both tails');
      for (const instance of pair) {
        expect(instance.seen.filter((entry) => JSON.stringify(entry.stored.event).includes('FORGED'))).toEqual([]);
        expectExactlyOnceInOrder(instance, head, 10);
      }
    }, 60_000);
  }

  it.skipIf(natsMissing !== null)('nats killed mid-stream: the tails still see everything, by reading the database', async () => {
    const url = await cluster.createDatabase();
    await migrate(postgres(url, { max: 1, onnotice: () => {} }));
    const pair = await instances('nats', url);
    const conversations = [randomUUID(), randomUUID()];
    await appendFromBoth(pair, 100, conversations);
    await waitFor(() => pair.every((instance) => instance.seen.length >= 100), 'the first 100 events');
    natsServer!.kill();
    const readBefore = pair.map((instance) => instance.tail.stats.read);
    await appendFromBoth(pair, 100, conversations);
    await waitFor(() => pair.every((instance) => instance.seen.length >= 200), 'the 100 events appended with NATS down');
    for (const [i, instance] of pair.entries()) {
      expectExactlyOnceInOrder(instance, 0, 200);
      expect(instance.tail.stats.read).toBeGreaterThan(readBefore[i]!);
    }
  }, 60_000);
});
