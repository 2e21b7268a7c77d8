/**
 * The PostgreSQL event store, migrations and leases against a real PostgreSQL cluster started in
 * the test's own temp dir. "Two instances" are two independent connection pools.
 */
import { randomUUID } from 'node:crypto';
import postgres, { type Sql } from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate, MIGRATIONS } from '../../src/adapters/postgres/migrations.js';
import { LeaseLostError, PgEventStore } from '../../src/adapters/postgres/pg-event-store.js';
import { PgLeases } from '../../src/adapters/postgres/pg-leases.js';
import type { NewEvent } from '../../src/core/schemas/event.js';
import { findPostgres, startPostgres, type PostgresCluster } from '../support/postgres-cluster.js';

const binaries = findPostgres();
const skipReason = 'missing' in binaries ? binaries.missing : null;
if (skipReason) console.warn(`test/cluster/pg-event-store.test.ts: PostgreSQL tests skipped (${skipReason})`);

const message = (content: string): NewEvent => ({ kind: 'message', source: 'user', role: 'user', content }) as NewEvent;

describe.skipIf(skipReason !== null)('PostgreSQL event store', () => {
  let cluster: PostgresCluster;
  let url: string;
  const pools: Sql[] = [];
  const pool = (max = 4) => {
    const sql = postgres(url, { max, onnotice: () => {} });
    pools.push(sql);
    return sql;
  };
  /** One instance's view of the database: its own pool, leases and event store. */
  const instance = () => {
    const sql = pool();
    return { leases: new PgLeases(sql), store: new PgEventStore(sql) };
  };

  beforeAll(async () => {
    cluster = await startPostgres(binaries as Exclude<typeof binaries, { missing: string }>);
    url = await cluster.createDatabase();
  }, 60_000);

  afterAll(async () => {
    await Promise.all(pools.map((sql) => sql.end({ timeout: 5 })));
    await cluster?.stop();
  }, 60_000);

  it('migrations started by three instances at once are applied exactly once', async () => {
    const results = await Promise.all([migrate(pool(1)), migrate(pool(1)), migrate(pool(1))]);
    expect(results.flat()).toEqual(MIGRATIONS.map((migration) => migration.version));
    const [row] = await pool(1)<{ n: string }[]>`SELECT count(*) AS n FROM agentd_schema_migrations`;
    expect(Number(row!.n)).toBe(MIGRATIONS.length);
    expect(await migrate(pool(1))).toEqual([]);
  });

  it('two instances appending to one conversation at once: seq 1..N with no gap or duplicate, firehose in commit order', async () => {
    const a = new PgEventStore(pool(8));
    const b = new PgEventStore(pool(8));
    const conversation = randomUUID();
    const headBefore = await a.globalHead();
    const appends = Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? a : b).append(conversation, message(`m${i}`)));
    const appended = await Promise.all(appends);
    expect(appended.map((entry) => entry.event.seq).sort((x, y) => x - y)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    expect(await a.lastSeq(conversation)).toBe(200);
    expect(await b.count(conversation, {})).toBe(200);
    // The firehose has exactly these 200 positions after the head we started from, in seq order.
    const firehose = await b.readGlobal(headBefore, 1000);
    expect(firehose.map((entry) => entry.globalCursor)).toEqual(Array.from({ length: 200 }, (_, i) => headBefore + i + 1));
    expect(firehose.map((entry) => entry.stored.event.seq)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    // Timestamps never go backwards along seq.
    const stamps = firehose.map((entry) => Date.parse(entry.stored.event.timestamp));
    expect(stamps).toEqual([...stamps].sort((x, y) => x - y));
    // What is read is byte for byte what was written.
    const byId = new Map(appended.map((entry) => [entry.event.id, entry.json]));
    for (const entry of firehose) expect(entry.stored.json).toBe(byId.get(entry.stored.event.id));
  });

  it('pages in both orders with cursors and filters; find by id; drop', async () => {
    const store = new PgEventStore(pool());
    const conversation = randomUUID();
    for (let i = 1; i <= 30; i++) {
      await store.append(conversation, i % 3 === 0 ? ({ kind: 'state_update', source: 'system', status: 'running', run_id: null } as NewEvent) : message(`m${i}`));
    }
    const asc = await store.read(conversation, { order: 'asc', limit: 5, cursorSeq: 10 });
    expect(asc.map((entry) => entry.event.seq)).toEqual([11, 12, 13, 14, 15]);
    const desc = await store.read(conversation, { order: 'desc', limit: 4, cursorSeq: 10 });
    expect(desc.map((entry) => entry.event.seq)).toEqual([9, 8, 7, 6]);
    const states = await store.read(conversation, { order: 'asc', limit: 100, kinds: ['state_update'] });
    expect(states.map((entry) => entry.event.seq)).toEqual([3, 6, 9, 12, 15, 18, 21, 24, 27, 30]);
    expect(await store.count(conversation, { kinds: ['state_update'], afterSeq: 15 })).toBe(5);
    expect(await store.count(conversation, { sources: ['user'] })).toBe(20);
    expect(await store.count(conversation, { afterSeq: 25 })).toBe(5);
    const seventh = asc[0]!.event;
    expect((await store.findById(conversation, seventh.id))?.event.seq).toBe(11);
    expect(await store.findById(conversation, 'not-a-uuid')).toBeUndefined();
    expect(await store.findById(randomUUID(), seventh.id)).toBeUndefined();
    await store.drop(conversation);
    expect(await store.lastSeq(conversation)).toBe(0);
    expect(await store.read(conversation, { order: 'asc', limit: 10 })).toEqual([]);
  });

  it('fencing: an instance whose lease was taken over can no longer append', async () => {
    const [{ leases: leasesA, store: storeA }, { leases: leasesB, store: storeB }] = [instance(), instance()];
    const conversation = randomUUID();

    const first = await leasesA.acquire(conversation, 'instance-a', 60_000);
    expect(first.acquired).toBe(true);
    const fenceA = { owner: 'instance-a', token: first.lease.token };
    await storeA.append(conversation, message('from a'), fenceA);
    // B cannot take a live lease.
    const refused = await leasesB.acquire(conversation, 'instance-b', 10_000);
    expect(refused).toMatchObject({ acquired: false, lease: { owner: 'instance-a', token: first.lease.token } });
    // A "dies": its last renewal runs out at once (a renewal for 1 ms), and B takes the lease with a larger token.
    expect(await leasesA.renew({ conversationId: conversation, ...fenceA }, 1)).toBe(true);
    let taken = await leasesB.acquire(conversation, 'instance-b', 10_000);
    for (let tries = 0; !taken.acquired && tries < 100; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      taken = await leasesB.acquire(conversation, 'instance-b', 10_000);
    }
    expect(taken.acquired).toBe(true);
    expect(taken.lease.token).toBe(first.lease.token + 1);
    // A wakes up and tries to write and to renew: both refused.
    await expect(storeA.append(conversation, message('stale write from a'), fenceA)).rejects.toBeInstanceOf(LeaseLostError);
    expect(await leasesA.renew({ conversationId: conversation, ...fenceA }, 10_000)).toBe(false);
    await storeB.append(conversation, message('from b'), { owner: 'instance-b', token: taken.lease.token });
    const events = await storeB.read(conversation, { order: 'asc', limit: 10 });
    expect(events.map((entry) => (entry.event as { content?: string }).content)).toEqual(['from a', 'from b']);
    expect(events.map((entry) => entry.event.seq)).toEqual([1, 2]);
  });

  /** Lets a held lease run out (a last renewal of 1 ms) and waits until the database sees it expired. */
  async function lapse(leases: PgLeases, lease: { conversationId: string; owner: string; token: number }): Promise<void> {
    expect(await leases.renew(lease, 1)).toBe(true);
    for (let tries = 0; tries < 500; tries++) {
      if ((await leases.expired(10_000)).some((expired) => expired.conversationId === lease.conversationId)) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error(`the lease of ${lease.conversationId} never expired`);
  }

  it('fencing is by token, not owner: the same instance re-acquiring a lapsed lease cannot append under its old token', async () => {
    const sql = pool();
    const leases = new PgLeases(sql);
    const store = new PgEventStore(sql);
    const conversation = randomUUID();

    const first = await leases.acquire(conversation, 'instance-a', 60_000);
    expect(first.acquired).toBe(true);
    const old = { owner: 'instance-a', token: first.lease.token };
    await store.append(conversation, message('under n'), old);
    await lapse(leases, { conversationId: conversation, ...old });
    const second = await leases.acquire(conversation, 'instance-a', 60_000);
    expect(second).toMatchObject({ acquired: true, lease: { owner: 'instance-a', token: first.lease.token + 1 } });
    // The owner is the same; only the token tells the paused writer of lease n from the holder of n+1.
    await expect(store.append(conversation, message('stale write under n'), old)).rejects.toBeInstanceOf(LeaseLostError);
    expect(await leases.renew({ conversationId: conversation, ...old }, 60_000)).toBe(false);
    await store.append(conversation, message('under n+1'), { owner: 'instance-a', token: second.lease.token });
    const events = await store.read(conversation, { order: 'asc', limit: 10 });
    expect(events.map((entry) => (entry.event as { content?: string }).content)).toEqual(['under n', 'under n+1']);
  });

  it('fencing after A -> B -> A: neither A\'s first token nor B\'s can append, only A\'s newest', async () => {
    const [{ leases: leasesA, store: storeA }, { leases: leasesB, store: storeB }] = [instance(), instance()];
    const conversation = randomUUID();

    const a1 = await leasesA.acquire(conversation, 'instance-a', 60_000);
    expect(a1.acquired).toBe(true);
    const fenceA1 = { owner: 'instance-a', token: a1.lease.token };
    await storeA.append(conversation, message('a first'), fenceA1);
    await lapse(leasesA, { conversationId: conversation, ...fenceA1 });
    const b = await leasesB.acquire(conversation, 'instance-b', 60_000);
    expect(b).toMatchObject({ acquired: true, lease: { owner: 'instance-b', token: a1.lease.token + 1 } });
    const fenceB = { owner: 'instance-b', token: b.lease.token };
    await storeB.append(conversation, message('b'), fenceB);
    await lapse(leasesB, { conversationId: conversation, ...fenceB });
    const a2 = await leasesA.acquire(conversation, 'instance-a', 60_000);
    expect(a2).toMatchObject({ acquired: true, lease: { owner: 'instance-a', token: a1.lease.token + 2 } });
    const fenceA2 = { owner: 'instance-a', token: a2.lease.token };

    // A's first lease has A's name on it again, yet its token is two behind: refused.
    await expect(storeA.append(conversation, message('stale a first'), fenceA1)).rejects.toBeInstanceOf(LeaseLostError);
    await expect(storeB.append(conversation, message('stale b'), fenceB)).rejects.toBeInstanceOf(LeaseLostError);
    expect(await leasesA.renew({ conversationId: conversation, ...fenceA1 }, 60_000)).toBe(false);
    expect(await leasesB.renew({ conversationId: conversation, ...fenceB }, 60_000)).toBe(false);
    await storeA.append(conversation, message('a second'), fenceA2);
    const events = await storeB.read(conversation, { order: 'asc', limit: 10 });
    expect(events.map((entry) => (entry.event as { content?: string }).content)).toEqual(['a first', 'b', 'a second']);
    expect(events.map((entry) => entry.event.seq)).toEqual([1, 2, 3]);
  });

  it('a lease renewed by its holder stays; released, the next holder gets a larger token', async () => {
    const leases = new PgLeases(pool());
    const conversation = randomUUID();
    const held = await leases.acquire(conversation, 'a', 10_000);
    const again = await leases.acquire(conversation, 'a', 10_000);
    expect(again).toMatchObject({ acquired: true, lease: { token: held.lease.token } });
    expect(await leases.renew({ conversationId: conversation, owner: 'a', token: held.lease.token }, 10_000)).toBe(true);
    await leases.release({ conversationId: conversation, owner: 'a', token: held.lease.token });
    expect((await leases.expired(1000)).some((lease) => lease.conversationId === conversation)).toBe(true);
    const next = await leases.acquire(conversation, 'b', 10_000);
    expect(next).toMatchObject({ acquired: true, lease: { owner: 'b', token: held.lease.token + 1 } });
  });
});
