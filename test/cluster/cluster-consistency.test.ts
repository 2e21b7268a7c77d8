/**
 * Three built servers (dist/) on one PostgreSQL database (and NATS JetStream when installed):
 * - any instance answers about a conversation (the record, its runs, its events, its place in
 *   the list with event_count, updated_at, usage and status) exactly as its owner does, right
 *   after each change the owner answered;
 * - a request forwarded to an owner that is stopped (SIGSTOP) ends: a GET is served by the
 *   instance asked once the lease lapsed, a body request is answered 503 owner_unavailable with
 *   Retry-After within about a lease, and the owner, woken (SIGCONT), writes nothing more;
 * - after kill -9 of an owner, its conversations are served by another instance at once (dead:
 *   silent and nothing listens at its address), well before its leases would have expired, and
 *   a conversation found damaged by the instance taking it over is quarantined on every instance.
 */
import { isDeepStrictEqual } from 'node:util';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { tempDir, type SpawnedServer } from '../support/agentd.js';
import { findNatsServer, startNatsServer, type NatsServer } from '../support/nats-server.js';
import { findPostgres, startPostgres, type PostgresCluster } from '../support/postgres-cluster.js';
import { rawRequest } from '../support/raw-http.js';
import { clusterHeaders as headers, clusterRequest as api, eventually as until, startInstance, type ClusterAnswer as Answer } from '../support/cluster-instances.js';

const pg = findPostgres();
const nats = findNatsServer();
const skipReason = 'missing' in pg ? pg.missing : null;
if (skipReason) console.warn(`test/cluster/cluster-consistency.test.ts: skipped (${skipReason})`);

const TTL_S = 4;




describe.skipIf(skipReason !== null)('three instances answer alike', () => {
  let cluster: PostgresCluster;
  let natsServer: NatsServer | null = null;
  let llm: FakeLlm;
  let databaseUrl: string;
  let a: SpawnedServer;
  let b: SpawnedServer;
  let c: SpawnedServer;
  const servers: SpawnedServer[] = [];

  beforeAll(async () => {
    cluster = await startPostgres(pg as Exclude<typeof pg, { missing: string }>);
    if (!('missing' in nats)) natsServer = await startNatsServer(nats.path);
    llm = await startFakeLlm({});
    databaseUrl = await cluster.createDatabase();
    const workdirs = tempDir('agentd-consistency-workdirs-');
    const start = async () => {
      const server = await startInstance({ databaseUrl, natsUrl: natsServer?.url, workdirs, leaseTtlS: TTL_S }, { dataDir: tempDir() });
      servers.push(server);
      return server;
    };
    [a, b, c] = (await Promise.all([start(), start(), start()])) as [SpawnedServer, SpawnedServer, SpawnedServer];
  }, 120_000);

  afterAll(async () => {
    for (const server of servers) {
      server.child.kill('SIGCONT');
      server.child.kill('SIGKILL');
    }
    await llm?.close();
    await natsServer?.stop();
    await cluster?.stop();
  }, 60_000);

  const create = async (on: SpawnedServer, body: Record<string, unknown> = {}) => {
    const created = await api(on.url, '/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, ...body }) });
    expect(created.status).toBe(201);
    return created.body.id as string;
  };

  /** What an instance says about the conversation: the record, its runs, its events, its item in the list. */
  const snapshot = async (server: SpawnedServer, id: string) => {
    const [conversation, runs, events, list] = await Promise.all([
      api(server.url, `/conversations/${id}`),
      api(server.url, `/conversations/${id}/runs?limit=100`),
      api(server.url, `/conversations/${id}/events?limit=1000`),
      api(server.url, '/conversations?limit=100'),
    ]);
    return { conversation: conversation.body, runs: runs.body, events: events.body, listed: list.body.items.find((item: { id: string }) => item.id === id) };
  };

  /**
   * What B and C say equals what A (the owner) says, asked right after A: the comparison counts
   * when A's own answer was the same before and after (a run's last steps may still be landing
   * when a test sees it end; then it is made again).
   */
  const expectAlike = async (id: string) => {
    for (let attempt = 1; ; attempt++) {
      const before = await snapshot(a, id);
      const others = [await snapshot(b, id), await snapshot(c, id)];
      const after = await snapshot(a, id);
      if (!isDeepStrictEqual(before, after) && attempt < 5) continue;
      expect(after).toEqual(before);
      expect(before.conversation.id).toBe(id);
      expect(before.listed).toEqual(before.conversation);
      for (const other of others) expect(other).toEqual(before);
      return before.conversation;
    }
  };

  it('any instance answers as the owner does right after each change: record, runs, events, list (event_count, updated_at, usage, status)', { timeout: 120_000 }, async () => {
    // Read from B the moment A created it: the events are there, not a 404.
    const id = await create(a, { initial_message: 'hello', run: false, title: 'alike' });
    const fresh = await api(b.url, `/conversations/${id}/events?limit=10`);
    expect(fresh.status).toBe(200);
    expect(fresh.body.items.map((event: { kind: string }) => event.kind)).toContain('message');
    await expectAlike(id);

    expect((await api(a.url, `/conversations/${id}/messages`, { method: 'POST', body: JSON.stringify({ content: 'one more', run: false }) })).status).toBe(202);
    expect((await expectAlike(id)).event_count).toBeGreaterThanOrEqual(2);

    // A run on A: its usage, status and events, seen alike once A says it ended.
    expect((await api(a.url, `/conversations/${id}/run`, { method: 'POST', body: '{}' })).status).toBe(202);
    await until('the run ended on A', 30_000, async () => (await api(a.url, `/conversations/${id}`)).body.status === 'finished' || (await api(a.url, `/conversations/${id}`)).body.status === 'idle');
    const afterRun = await expectAlike(id);
    expect(afterRun.usage.prompt_tokens).toBeGreaterThan(0);
    expect(afterRun.current_run_id).toBeNull();

    // A change through C (forwarded to A) is seen by B at once.
    expect((await api(c.url, `/conversations/${id}/config`, { method: 'PUT', body: JSON.stringify({ title: 'renamed' }) })).status).toBe(200);
    expect((await expectAlike(id)).title).toBe('renamed');
    // A request target in absolute form names a host of the client's choosing: forwarded by its path alone.
    for (const server of [a, b, c]) {
      const absolute = await rawRequest({ url: server.url, method: 'GET', path: `http://elsewhere.invalid:1/conversations/${id}?limit=1`, headers: { authorization: headers.authorization } });
      expect(absolute.status, absolute.text).toBe(200);
      expect(JSON.parse(absolute.text).id).toBe(id);
    }
    const renamed = await rawRequest({ url: c.url, method: 'PUT', path: `http://elsewhere.invalid:1/conversations/${id}/config`, headers, body: JSON.stringify({ title: 'renamed again' }) });
    expect(renamed.status, renamed.text).toBe(200);
    expect((await expectAlike(id)).title).toBe('renamed again');
    // Deleted through B: gone everywhere, list included.
    expect((await api(b.url, `/conversations/${id}`, { method: 'DELETE' })).status).toBe(204);
    for (const server of [a, b, c]) {
      expect((await api(server.url, `/conversations/${id}`)).status).toBe(404);
      expect((await api(server.url, '/conversations?limit=100')).body.items.map((item: { id: string }) => item.id)).not.toContain(id);
    }
  });

  it('an instance whose connection listening for record changes was cut reads every record again: nothing changed meanwhile is missed', { timeout: 120_000 }, async () => {
    const id = await create(a, { initial_message: 'hello', run: false, title: 'before the cut' });
    await expectAlike(id);
    const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    try {
      const cut = await sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ILIKE 'listen%'`;
      expect(cut.length).toBeGreaterThanOrEqual(3);
    } finally {
      await sql.end();
    }
    expect((await api(a.url, `/conversations/${id}/config`, { method: 'PUT', body: JSON.stringify({ title: 'changed during the cut' }) })).status).toBe(200);
    for (const server of [b, c]) await until('the instance listened again and read every record', 30_000, async () => /^agentd_replication_resyncs_total [1-9]/m.test(await (await fetch(`${server.url}/metrics`, { headers })).text()));
    expect((await expectAlike(id)).title).toBe('changed during the cut');
  });

  it('a request forwarded to a stopped owner ends: a GET is served once the lease lapsed, a body request answered 503 with Retry-After; the owner, woken, writes nothing', { timeout: 120_000 }, async () => {
    const lost = async (server: SpawnedServer) => Number(/^agentd_cluster_leases_lost_total (\d+)/m.exec(await (await fetch(`${server.url}/metrics`, { headers })).text())?.[1] ?? 0);
    const id = await create(a, { initial_message: 'hello', run: false });
    await expectAlike(id);
    // A stops: a GET through B waits for A's silence, then for its lease, and is served by B.
    a.child.kill('SIGSTOP');
    let read: Answer;
    try {
      read = await api(b.url, `/conversations/${id}`);
    } finally {
      a.child.kill('SIGCONT');
    }
    expect(read.status).toBe(200);
    expect(read.ms).toBeLessThan(2 * TTL_S * 1000 + 5_000);
    await until('A noticed it lost the lease', 30_000, async () => (await lost(a)) >= 1);
    await expectAlike(id);

    // Its owner now (B, or C when C's sweep got there first) stops: a message through the other
    // is answered 503 within about a lease, not after the relay's old 60 s.
    const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    const [row] = await sql<{ url: string }[]>`SELECT i.url FROM agentd_leases l JOIN agentd_instances i ON i.id = l.owner WHERE l.conversation_id = ${id}`;
    await sql.end();
    const owner = [b, c].find((server) => server.url === row?.url)!;
    expect(owner).toBeDefined();
    const other = owner === b ? c : b;
    const lostBefore = await lost(owner);
    owner.child.kill('SIGSTOP');
    let posted: Answer;
    try {
      posted = await api(other.url, `/conversations/${id}/messages`, { method: 'POST', body: JSON.stringify({ content: 'sent while the owner was stopped', run: false }) });
    } finally {
      owner.child.kill('SIGCONT');
    }
    expect(posted.status).toBe(503);
    expect(posted.body).toMatchObject({ error: 'owner_unavailable', details: { id } });
    expect(Number(posted.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(posted.ms).toBeLessThan(TTL_S * 1000 + 5_000);
    console.info(`stopped owner: a GET served by the instance asked after ${read.ms} ms, a POST answered 503 after ${posted.ms} ms (Retry-After ${posted.headers.get('retry-after')}); lease ${TTL_S} s`);
    // The owner, woken, finds its lease gone: served alike again, and the message it may have read late was never written.
    await until('the stopped owner noticed it lost the lease', 30_000, async () => (await lost(owner)) > lostBefore);
    await expectAlike(id);
    const events = (await api(a.url, `/conversations/${id}/events?limit=1000`)).body.items as { content?: string }[];
    expect(events.map((event) => event.content)).not.toContain('sent while the owner was stopped');
  });

  it('kill -9 of an owner: another instance serves its conversations at once, and one found damaged is quarantined on every instance', { timeout: 120_000 }, async () => {
    const idle = await create(a, { initial_message: 'hello', run: false });
    const damaged = await create(a, { initial_message: 'hello', run: false });
    await expectAlike(damaged);
    // Damaged in the database behind A's back (A holds it in memory and never reads it again).
    const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    await sql`UPDATE agentd_conversations SET body = '{"id": "torn' WHERE id = ${damaged}`;
    await sql.end();

    a.child.kill('SIGKILL');
    await a.exited;
    const killedAt = Date.now();
    // A message (a body) to B for A's conversation: served by B, with no 503 to retry.
    const posted = await api(b.url, `/conversations/${idle}/messages`, { method: 'POST', body: JSON.stringify({ content: 'after the kill', run: false }) });
    expect(posted.status).toBe(202);
    const servedMs = Date.now() - killedAt;
    expect(servedMs).toBeLessThan(TTL_S * 1000);
    const events = (await api(c.url, `/conversations/${idle}/events?limit=1000`)).body.items as { seq: number; content?: string }[];
    expect(events.map((event) => event.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.map((event) => event.content)).toContain('after the kill');

    // The damaged one is taken over by a sweep: the instance that reads it quarantines it, and tells the other.
    const quarantined = await until('the damaged conversation quarantined', 30_000, async () => {
      const answers = await Promise.all([b, c].map((server) => api(server.url, `/conversations/${damaged}`)));
      return answers.every((answer) => answer.body?.quarantine) ? answers : undefined;
    });
    const tookMs = Date.now() - killedAt;
    expect(quarantined[0]!.body).toEqual(quarantined[1]!.body);
    expect(quarantined[0]!.body).toMatchObject({ status: 'error', quarantine: { file: `agentd_conversations/${damaged}` } });
    for (const server of [b, c]) {
      const list = await api(server.url, '/conversations?limit=100');
      expect(list.body.items.find((item: { id: string }) => item.id === damaged)).toMatchObject({ status: 'error', quarantine: { file: `agentd_conversations/${damaged}` } });
      const read = await api(server.url, `/conversations/${damaged}/events`);
      expect(read.status).toBe(409);
      expect(read.body.error).toBe('conversation_quarantined');
    }
    console.info(`kill -9 of the owner: a message served by another instance ${servedMs} ms after, the damaged conversation quarantined everywhere after ${tookMs} ms (lease ${TTL_S} s)`);
  });
});
