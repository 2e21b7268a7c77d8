/**
 * The real server (dist/) on PostgreSQL: every store goes to the database, so a server started
 * again on an empty data dir serves everything the first one acknowledged: the conversation,
 * its events and runs, its secrets (sealed in the database), its callback and delivery log.
 */
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { spawnServer, tempDir, TEST_KEY, type SpawnedServer } from '../support/agentd.js';
import { findPostgres, startPostgres, type PostgresCluster } from '../support/postgres-cluster.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

const pg = findPostgres();
const skipReason = 'missing' in pg ? pg.missing : null;
if (skipReason) console.warn(`test/cluster/pg-server.test.ts: skipped (${skipReason})`);

const headers = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };

describe.skipIf(skipReason !== null)('agentd on PostgreSQL', () => {
  let cluster: PostgresCluster;
  let llm: FakeLlm;
  let receiver: WebhookReceiver;
  let server: SpawnedServer | undefined;

  beforeAll(async () => {
    cluster = await startPostgres(pg as Exclude<typeof pg, { missing: string }>);
    receiver = await WebhookReceiver.start();
  }, 60_000);

  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await llm?.close();
    await receiver?.close();
    await cluster?.stop();
  }, 60_000);

  it('keeps conversations, events, runs, secrets and callbacks across a restart on a fresh data dir', { timeout: 120_000 }, async () => {
    const databaseUrl = await cluster.createDatabase();
    const workdirBase = tempDir('agentd-pg-workdirs-');
    const env = { AGENTD_DATABASE_URL: databaseUrl, AGENTD_SECRET_KEY: 'a-secret-key-for-this-test', AGENTD_WORKDIR_BASE: workdirBase };
    llm = await startFakeLlm([{ text: 'listing', toolCalls: [{ name: 'bash', arguments: { command: 'echo "token=$API_TOKEN"' } }] }, { text: 'all done' }, { text: 'second run done' }]);
    server = await spawnServer({ dataDir: tempDir(), env });
    const api = async (path: string, init: RequestInit = {}) => {
      const response = await fetch(`${server!.url}${path}`, { ...init, headers });
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : null };
    };

    const secretValue = 'sk-live-0123456789abcdef';
    const created = await api('/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake', base_url: llm.url, api_key: 'llm-key-xyz' }, secrets: { API_TOKEN: secretValue }, title: 'on postgres' }) });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const callback = await api(`/conversations/${id}/callbacks`, { method: 'POST', body: JSON.stringify({ url: receiver.url }) });
    expect(callback.status).toBe(201);
    expect((await api(`/conversations/${id}/messages`, { method: 'POST', body: JSON.stringify({ content: "print the token" }) })).status).toBe(202);
    const runsEnded = async (count: number) => {
      const until = Date.now() + 60_000;
      for (;;) {
        const runs = (await api(`/conversations/${id}/runs`)).body.items as { status: string }[];
        // The run record ends just before the state_update that ends the run is appended: both, so the log is read whole.
        const [last] = (await api(`/conversations/${id}/events?order=desc&limit=1`)).body.items as { kind: string; status?: string }[];
        if (runs.length === count && runs.every((run) => run.status !== 'running') && last?.kind === 'state_update' && last.status !== 'running') return;
        if (Date.now() > until) throw new Error(`runs did not end: ${JSON.stringify(runs)}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };
    await runsEnded(1);
    const before = (await api(`/conversations/${id}/events?limit=100`)).body.items as { seq: number; kind: string; content?: string }[];
    expect(before.map((event) => event.seq)).toEqual(before.map((_, i) => i + 1));
    expect(JSON.stringify(before)).not.toContain(secretValue);
    await receiver.waitFor(() => receiver.seqs.at(-1) === before.at(-1)!.seq, 'every event delivered', 20_000);
    const runsBefore = (await api(`/conversations/${id}/runs`)).body.items;
    expect(runsBefore).toHaveLength(1);
    expect(runsBefore[0].status).toBe('completed');

    // Secrets and the LLM key are sealed in the database.
    const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    const [row] = await sql<{ body: string }[]>`SELECT body FROM agentd_conversations WHERE id = ${id}`;
    await sql.end();
    expect(row!.body).not.toContain(secretValue);
    expect(row!.body).not.toContain('llm-key-xyz');
    expect(row!.body).toContain('API_TOKEN');

    // kill -9, then a new server with an empty data dir.
    server.child.kill('SIGKILL');
    await server.exited;
    server = await spawnServer({ dataDir: tempDir(), env });
    // The killed process still holds the lease, but it is silent and nothing listens at its
    // address: the new one takes the conversation over at once (no 503 to wait out).
    const after = await api(`/conversations/${id}`);
    expect(after.status).toBe(200);
    expect(after.body).toMatchObject({ id, title: 'on postgres', status: 'idle' });
    expect((await api(`/conversations/${id}/events?limit=100`)).body.items).toEqual(before);
    expect((await api(`/conversations/${id}/runs`)).body.items).toEqual(runsBefore);
    expect((await api(`/conversations/${id}/secrets`)).body.names).toEqual(['API_TOKEN']);
    const callbacks = (await api(`/conversations/${id}/callbacks`)).body.items;
    expect(callbacks).toHaveLength(1);
    const deliveries = (await api(`/conversations/${id}/callbacks/${callbacks[0].id}/deliveries?limit=100`)).body.items as { seq: number; state: string }[];
    expect(deliveries.map((delivery) => [delivery.seq, delivery.state])).toEqual(before.map((event) => [event.seq, 'delivered']));

    // It carries on: the next run numbers after the last event and is delivered once, in order.
    expect((await api(`/conversations/${id}/messages`, { method: 'POST', body: JSON.stringify({ content: "again" }) })).status).toBe(202);
    await runsEnded(2);
    const all = (await api(`/conversations/${id}/events?limit=100`)).body.items as { seq: number }[];
    expect(all.length).toBeGreaterThan(before.length);
    await receiver.waitFor(() => receiver.seqs.at(-1) === all.at(-1)!.seq, 'the second run delivered', 20_000);
    expect(receiver.seqs).toEqual(all.map((event) => event.seq));
    expect((await api(`/conversations/${id}/runs`)).body.items).toHaveLength(2);
  });
});
