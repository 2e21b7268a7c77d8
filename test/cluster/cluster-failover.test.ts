/**
 * Three built servers (dist/) on one PostgreSQL database (and NATS JetStream when installed):
 * requests to any instance reach the conversation's owner; a run on A is streamed from B and C;
 * A is killed with SIGKILL mid-run; another instance takes the lease within 10 s, closes the
 * open tool call and marks the run paused; the SSE streams on B and C and the webhook receiver
 * see every event once, in order, with no gap.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import postgres from 'postgres';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { freePort, spawnServer, tempDir, type SpawnedServer } from '../support/agentd.js';
import { findNatsServer, startNatsServer, type NatsServer } from '../support/nats-server.js';
import { findPostgres, startPostgres, type PostgresCluster } from '../support/postgres-cluster.js';
import { connectSse, type SseConnection } from '../support/sse-client.js';
import { killMatching, liveDescendants, runsIn } from '../support/processes.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';
import { clusterHeaders as headers, clusterRequest, eventually as until, startInstance } from '../support/cluster-instances.js';

const pg = findPostgres();
const nats = findNatsServer();
const skipReason = 'missing' in pg ? pg.missing : null;
if (skipReason) console.warn(`test/cluster/cluster-failover.test.ts: skipped (${skipReason})`);
else if ('missing' in nats) console.warn(`test/cluster/cluster-failover.test.ts: runs on LISTEN/NOTIFY (${nats.missing})`);

// Bounded: a request forwarded to a stopped (not dead) holder waits for it; the probes retry.
const api = (base: string, path: string, init: RequestInit = {}) => clusterRequest(base, path, init, 5_000);


/**
 * The first run's record once another instance has paused it and written its last write, the
 * state_update that says so (it comes after the run record); undefined before.
 */
async function takenOver(base: string, id: string): Promise<{ status: string; outcome: string } | undefined> {
  const runs = (await api(base, `/conversations/${id}/runs`)).body?.items as { status: string; outcome: string }[] | undefined;
  if (runs?.[0]?.status !== 'paused') return undefined;
  const events = (await api(base, `/conversations/${id}/events?limit=1000`)).body.items as { kind: string; status?: string }[];
  return events.some((event) => event.kind === 'state_update' && event.status === 'paused') ? runs[0] : undefined;
}

/** The stored events an SSE connection received (deltas and comments left out), by seq. */
const seqsOf = (connection: SseConnection) => connection.messages.filter((message) => message.id !== undefined).map((message) => (JSON.parse(message.data) as { seq: number }).seq);

/** Locks the webhook subscriptions' table (a takeover reads them last) until `release()`; `holding` ends with the lock's transaction. */
async function lockWebhooks(sql: postgres.Sql): Promise<{ release: () => void; holding: Promise<unknown> }> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const lockTaken = new Promise<void>((resolve) => (locked = resolve));
  const holding = sql.begin(async (tx) => {
    await tx`LOCK TABLE agentd_webhooks IN ACCESS EXCLUSIVE MODE`;
    locked();
    await released;
  });
  await lockTaken;
  return { release, holding };
}

describe.skipIf(skipReason !== null)('three instances on one database', () => {
  let cluster: PostgresCluster;
  let natsServer: NatsServer | null = null;
  let llm: FakeLlm;
  let receiver: WebhookReceiver;
  const servers: SpawnedServer[] = [];
  const streams: SseConnection[] = [];
  /** The command the killed instance was running: its process outlives it (another host would have lost it with the machine). */
  const marker = `sleep 6${Math.floor(Math.random() * 9)}.${Date.now() % 1000}`;

  beforeAll(async () => {
    cluster = await startPostgres(pg as Exclude<typeof pg, { missing: string }>);
    if (!('missing' in nats)) natsServer = await startNatsServer(nats.path);
    receiver = await WebhookReceiver.start();
  }, 60_000);

  afterAll(async () => {
    for (const stream of streams) stream.close();
    for (const server of servers) server.child.kill('SIGKILL');
    killMatching(marker);
    await llm?.close();
    await receiver?.close();
    await natsServer?.stop();
    await cluster?.stop();
  }, 60_000);

  it('a run on A streamed from B and C survives kill -9 of A: takeover within 10 s, no gap, no duplicate', { timeout: 180_000 }, async () => {
    const databaseUrl = await cluster.createDatabase();
    const workdirs = tempDir('agentd-cluster-workdirs-');
    llm = await startFakeLlm([{ text: 'starting', toolCalls: [{ name: 'bash', arguments: { command: marker } }] }, { text: 'after failover' }]);
    const start = () => startInstance({ databaseUrl, natsUrl: natsServer?.url, workdirs, leaseTtlS: 3 }, { dataDir: tempDir() });
    const [a, b, c] = await Promise.all([start(), start(), start()]);
    servers.push(a!, b!, c!);

    // Created on A (A holds it from its first append); the callback is added through B and the message posted through C: both forwarded to A.
    const created = await api(a!.url, '/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, initial_message: 'hello', run: false }) });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    expect((await api(b!.url, `/conversations/${id}/callbacks`, { method: 'POST', body: JSON.stringify({ url: receiver.url }) })).status).toBe(201);
    for (const server of [b!, c!]) streams.push(await connectSse(`${server.url}/conversations/${id}/events/stream?after=0`, { authorization: headers.authorization }));
    expect((await api(c!.url, `/conversations/${id}/messages`, { method: 'POST', body: JSON.stringify({ content: 'run it' }) })).status).toBe(202);

    // The bash call runs on A: both streams saw the action.
    for (const stream of streams) await stream.waitFor((messages) => messages.some((message) => message.event === 'action'), 30_000);
    const killedAt = Date.now();
    a!.child.kill('SIGKILL');
    await a!.exited;

    // Another instance holds the lease and paused the run: seen through B and C.
    const paused = await until('the run paused after failover', 30_000, () => takenOver(b!.url, id));
    const tookMs = Date.now() - killedAt;
    console.info(`kill -9 of the owner mid-run: the run paused by another instance ${tookMs} ms after (lease 3 s)`);
    expect(paused.outcome).toBe('failover');
    expect(tookMs).toBeLessThan(10_000);
    expect((await api(c!.url, `/conversations/${id}`)).body.status).toBe('paused');

    // /health checks the database (and NATS); /metrics counts the failover on the instance that took it.
    let failovers = 0;
    for (const server of [b!, c!]) {
      const health = await api(server.url, '/health');
      expect(health.status).toBe(200);
      expect(health.body.checks.database).toEqual({ ok: true, detail: null });
      if (natsServer) expect(health.body.checks.nats).toEqual({ ok: true, detail: null });
      const metrics = await (await fetch(`${server.url}/metrics`, { headers })).text();
      failovers += Number(/^agentd_cluster_failovers_total (\d+)/m.exec(metrics)?.[1] ?? 'NaN');
      expect(metrics).toMatch(/^agentd_replication_lag_events \d+/m);
    }
    expect(failovers).toBe(1);

    const events = (await api(c!.url, `/conversations/${id}/events?limit=1000`)).body.items as { seq: number; kind: string; is_error?: boolean; content?: string }[];
    expect(events.map((event) => event.seq)).toEqual(events.map((_, i) => i + 1));
    const closed = events.find((event) => event.kind === 'observation');
    expect(closed).toMatchObject({ is_error: true });
    expect(closed!.content).toContain('Interrupted');
    const all = events.map((event) => event.seq);
    for (const stream of streams) {
      await stream.waitFor(() => seqsOf(stream).at(-1) === all.at(-1), 15_000);
      expect(seqsOf(stream)).toEqual(all);
    }
    await receiver.waitFor(() => receiver.seqs.at(-1) === all.at(-1), 'every event delivered once after failover', 30_000);
    expect(receiver.seqs).toEqual(all);

    // The conversation carries on from whichever instance is asked.
    expect((await api(b!.url, `/conversations/${id}/run`, { method: 'POST', body: '{}' })).status).toBe(202);
    // The run's record says completed before its last write, the state_update that says so: the
    // stored events are compared once that is in (read before it, the streams would be one ahead).
    const final = await until('the resumed run completed', 30_000, async () => {
      const runs = (await api(c!.url, `/conversations/${id}/runs`)).body?.items as { status: string }[] | undefined;
      if (runs?.length !== 2 || runs[1]!.status !== 'completed') return undefined;
      const stored = (await api(b!.url, `/conversations/${id}/events?limit=1000`)).body.items as { seq: number; kind: string; status?: string }[];
      return stored.at(-1)?.kind === 'state_update' && stored.at(-1)?.status === 'idle' ? stored : undefined;
    });
    expect(final.map((event) => event.seq)).toEqual(final.map((_, i) => i + 1));
    for (const stream of streams) {
      await stream.waitFor(() => seqsOf(stream).at(-1) === final.at(-1)!.seq, 15_000);
      expect(seqsOf(stream)).toEqual(final.map((event) => event.seq));
    }
    await receiver.waitFor(() => receiver.seqs.at(-1) === final.at(-1)!.seq, 'the resumed run delivered', 30_000);
    expect(receiver.seqs).toEqual(final.map((event) => event.seq));
  });

  it('an instance that stalls past its lease (SIGSTOP) can write nothing once it wakes: fenced out', { timeout: 120_000 }, async () => {
    const databaseUrl = await cluster.createDatabase();
    const stalled = `sleep 4.${Date.now() % 1000}`;
    const llm2 = await startFakeLlm([{ text: 'working', toolCalls: [{ name: 'bash', arguments: { command: stalled } }] }, { text: 'the zombie would say this' }]);
    try {
      const start = async () => {
        const port = await freePort();
        return spawnServer({
          dataDir: tempDir(),
          port,
          env: { AGENTD_DATABASE_URL: databaseUrl, AGENTD_SECRET_KEY: 'one-key-for-every-instance', AGENTD_WORKDIR_BASE: tempDir('agentd-cluster-workdirs-'), AGENTD_INSTANCE_URL: `http://127.0.0.1:${port}`, AGENTD_LEASE_TTL_S: '2' },
        });
      };
      const [a, b] = await Promise.all([start(), start()]);
      servers.push(a!, b!);
      const created = await api(a!.url, '/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake', base_url: llm2.url, api_key: 'k' }, initial_message: 'go' }) });
      const id = created.body.id as string;
      await until('the bash call started on A', 30_000, async () => ((await api(b!.url, `/conversations/${id}/events?limit=100`)).body.items as { kind: string }[]).some((event) => event.kind === 'action'));
      // A's shell (and the command in it) is alive while it runs the conversation: processes of A's
      // in its workdir (A may also hold the shell it started ahead for its next conversation, elsewhere).
      const workdir = created.body.workdir as string;
      const inWorkdir = () => liveDescendants(a!.child.pid!).filter((pid) => runsIn(pid, workdir));
      expect(inWorkdir().length).toBeGreaterThan(0);
      a!.child.kill('SIGSTOP');
      const paused = await until('B took the run over', 30_000, () => takenOver(b!.url, id));
      expect(paused.outcome).toBe('failover');
      const afterTakeover = (await api(b!.url, `/conversations/${id}/events?limit=100`)).body.items;
      // A wakes up: its bash call has ended meanwhile and its run wants to carry on.
      a!.child.kill('SIGCONT');
      await until('A noticed it lost the lease', 30_000, async () => /^agentd_cluster_leases_lost_total 1$/m.test(await (await fetch(`${a!.url}/metrics`, { headers })).text()));
      // Its shell goes with the lease: left running, it sat in the workdir B now works in until A exited.
      await until("A closed its shell of the conversation it lost", 15_000, async () => inWorkdir().length === 0);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect((await api(b!.url, `/conversations/${id}/events?limit=100`)).body.items).toEqual(afterTakeover);
      expect((await api(b!.url, `/conversations/${id}`)).body.status).toBe('paused');
      expect((await api(b!.url, `/conversations/${id}/runs`)).body.items[0]).toMatchObject({ status: 'paused', outcome: 'failover' });
      // Asked through A, the conversation is served by B now.
      expect((await api(a!.url, `/conversations/${id}`)).body.status).toBe('paused');
    } finally {
      await llm2.close();
    }
  });

  /** Two instances on a new database, a conversation on A with a callback to the receiver, and a connection to the database (end it). */
  async function twoInstancesAndACallback(title: string) {
    const databaseUrl = await cluster.createDatabase();
    const options = { databaseUrl, workdirs: tempDir('agentd-cluster-workdirs-'), leaseTtlS: 2 };
    const [a, b] = await Promise.all([startInstance(options, { dataDir: tempDir() }), startInstance(options, { dataDir: tempDir() })]);
    servers.push(a, b);
    const created = await api(a.url, '/conversations', { method: 'POST', body: JSON.stringify({ title }) });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const callback = await api(a.url, `/conversations/${id}/callbacks`, { method: 'POST', body: JSON.stringify({ url: receiver.url }) });
    expect(callback.status).toBe(201);
    const sql = postgres(databaseUrl, { max: 2, onnotice: () => {} });
    const leaseOwner = async () => (await sql<{ owner: string }[]>`SELECT owner FROM agentd_leases WHERE conversation_id = ${id}`)[0]?.owner;
    return { a, b, id, callbackId: callback.body.id as string, sql, leaseOwner };
  }

  it('a request that reaches an instance while it takes a conversation over waits for the takeover to finish: the callbacks are there', { timeout: 120_000 }, async () => {
    const { a, b, id, callbackId, sql, leaseOwner } = await twoInstancesAndACallback('taken over');
    // The takeover reads the webhook subscriptions last: a lock on their table holds it there.
    try {
      const owner = await leaseOwner();
      const { release, holding } = await lockWebhooks(sql);
      a.child.kill('SIGKILL');
      // B's sweep finds A dead and takes the lease: the takeover has begun, and waits on the lock.
      await until('B took the lease', 30_000, async () => (await leaseOwner()) !== owner);
      // Asked meanwhile, B answers once the conversation is taken over whole (an answer before it had no callbacks).
      const asked = api(b.url, `/conversations/${id}/callbacks`);
      await new Promise((resolve) => setTimeout(resolve, 500));
      release();
      await holding;
      const answer = await asked;
      expect(answer.status).toBe(200);
      expect(answer.body.items.map((item: { id: string }) => item.id)).toEqual([callbackId]);
    } finally {
      await sql.end();
    }
  });

  it('a takeover that fails midway (its query cancelled) is made again by the next request: the callbacks are not lost', { timeout: 120_000 }, async () => {
    const { a, b, id, callbackId, sql, leaseOwner } = await twoInstancesAndACallback('taken over twice');
    try {
      const owner = await leaseOwner();
      const { release, holding } = await lockWebhooks(sql);
      a.child.kill('SIGKILL');
      // B's takeover waits on the lock, reading the subscriptions; its query is cancelled there.
      const waiting = await until("B's takeover waiting on the lock", 30_000, async () => {
        const rows = await sql<{ pid: number }[]>`SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FROM agentd_webhooks WHERE conversation_id%'`;
        return rows[0];
      });
      const asked = api(b.url, `/conversations/${id}/callbacks`);
      await sql`SELECT pg_cancel_backend(${waiting.pid})`;
      release();
      await holding;
      // Told to retry, or served by a takeover made again: never an answer without the callback.
      const first = await asked;
      if (first.status === 200) expect(first.body.items.map((item: { id: string }) => item.id)).toEqual([callbackId]);
      else expect([first.status, first.body.error, first.headers.get('retry-after')]).toEqual([503, 'takeover_failed', '1']);
      const again = await until('B serves the conversation', 30_000, async () => {
        const answer = await api(b.url, `/conversations/${id}/callbacks`);
        return answer.status === 200 ? answer : undefined;
      });
      expect(again.body.items.map((item: { id: string }) => item.id)).toEqual([callbackId]);
      expect(await leaseOwner()).not.toBe(owner);
    } finally {
      await sql.end();
    }
  });
});
