/**
 * Keys, owners and the audit log on PostgreSQL with two instances (dist/): a key made on one
 * works on the other, a rotation or a revocation on one holds on the other at once, another
 * owner's conversation (or schedule) is a 404 on both, both instances' entries are in one audit log,
 * and a key's requests a minute and an owner's spend are counted once for both.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tempDir, TEST_KEY, type SpawnedServer } from '../support/agentd.js';
import { eventually, startInstance } from '../support/cluster-instances.js';
import { findPostgres, startPostgres, type PostgresCluster } from '../support/postgres-cluster.js';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { client, EVERYONE, expectedStatus, FIXTURES, freshSchedule, keyedRoutes, USER_SCOPES, type MatrixWorld, type Who } from '../support/access-matrix.js';

const pg = findPostgres();
const skipReason = 'missing' in pg ? pg.missing : null;
if (skipReason) console.warn(`test/cluster/pg-access.test.ts: skipped (${skipReason})`);

describe.skipIf(skipReason !== null)('keys and owners on PostgreSQL, two instances', () => {
  let cluster: PostgresCluster;
  const instances: SpawnedServer[] = [];

  beforeAll(async () => {
    cluster = await startPostgres(pg as Exclude<typeof pg, { missing: string }>);
    const databaseUrl = await cluster.createDatabase();
    const shared = { databaseUrl, workdirs: tempDir('agentd-pg-access-workdirs-'), leaseTtlS: 5 };
    instances.push(await startInstance(shared, { dataDir: tempDir() }));
    instances.push(await startInstance(shared, { dataDir: tempDir() }));
  }, 120_000);

  afterAll(async () => {
    for (const instance of instances) instance.child.kill('SIGKILL');
    await cluster?.stop();
  }, 60_000);

  it('shares keys, rotations, revocations, owners and the audit log between instances', { timeout: 60_000 }, async () => {
    const [a, b] = instances as [SpawnedServer, SpawnedServer];
    const adminA = client(a.url, TEST_KEY);
    const adminB = client(b.url, TEST_KEY);
    const made = await adminA('POST', '/keys', { name: 'alice', owner: 'alice', scopes: USER_SCOPES });
    expect(made.status).toBe(201);
    const other = await adminA('POST', '/keys', { name: 'bob', owner: 'bob', scopes: USER_SCOPES });
    const aliceOnB = client(b.url, made.body.secret);
    const bobOnA = client(a.url, other.body.secret);

    const created = await aliceOnB('POST', '/conversations', { title: 'on b' });
    expect(created.status).toBe(201);
    expect(created.body.owner).toBe('alice');
    expect((await client(a.url, made.body.secret)('GET', `/conversations/${created.body.id}`)).status).toBe(200);
    expect((await bobOnA('GET', `/conversations/${created.body.id}`)).status).toBe(404);
    expect((await client(b.url, other.body.secret)('GET', `/conversations/${created.body.id}/events`)).status).toBe(404);
    expect((await bobOnA('GET', '/conversations')).body.items).toEqual([]);
    expect((await adminA('GET', '/conversations?owner=alice')).body.items.map((item: { id: string }) => item.id)).toEqual([created.body.id]);
    // Schedules too: the PostgreSQL list filters by owner, the other instance included.
    const schedule = await aliceOnB('POST', `/conversations/${created.body.id}/schedules`, { cron: '0 0 1 1 *', message: { content: 'yearly' } });
    expect(schedule.body.owner).toBe('alice');
    expect((await bobOnA('GET', '/schedules')).body.items).toEqual([]);
    expect((await bobOnA('GET', `/schedules/${schedule.body.id}/fires`)).status).toBe(404);
    expect((await adminA('GET', '/schedules?owner=alice')).body.items.map((item: { id: string }) => item.id)).toEqual([schedule.body.id]);
    expect((await adminA('GET', '/schedules?owner=bob')).body.items).toEqual([]);

    // Rotated on B with no grace: the old secret stops on A at once, the new one works there.
    const rotated = await adminB('POST', `/keys/${made.body.id}/rotate`, { grace_s: 0 });
    expect(rotated.status).toBe(200);
    expect((await client(a.url, made.body.secret)('GET', '/conversations')).status).toBe(401);
    expect((await client(a.url, rotated.body.secret)('GET', '/conversations')).status).toBe(200);
    // Revoked on A: refused on B.
    expect((await adminA('DELETE', `/keys/${other.body.id}`)).status).toBe(204);
    expect((await client(b.url, other.body.secret)('GET', '/conversations')).status).toBe(401);

    const audit = await adminB('GET', '/audit?limit=1000');
    expect(audit.status).toBe(200);
    const lines = audit.body.items.map((entry: { method: string; route: string; status: number; key_id: string }) => `${entry.method} ${entry.route} ${entry.status} ${entry.key_id}`);
    expect(lines).toContain(`POST /conversations 201 ${made.body.id}`);
    expect(lines).toContain(`GET /conversations/:id 404 ${other.body.id}`);
    expect(lines).toContain(`POST /keys/:id/rotate 200 master`);
    expect(lines).toContain(`GET /conversations 401 ${made.body.id}`);
    expect(lines).toContain(`DELETE /keys/:id 204 master`);
    const seqs = audit.body.items.map((entry: { seq: number }) => entry.seq);
    expect(seqs).toEqual([...seqs].sort((x: number, y: number) => x - y));
  });

  it('answers the access matrix the same, the world made on one instance and called on the other', { timeout: 90_000 }, async () => {
    const [a, b] = instances as [SpawnedServer, SpawnedServer];
    const admin = client(a.url, TEST_KEY);
    const llm: FakeLlm = await startFakeLlm();
    try {
      const key = async (extra: Record<string, unknown> = {}, scopes = USER_SCOPES, owner = 'zoe') => (await admin('POST', '/keys', { name: owner, owner, scopes, ...extra })).body as { id: string; secret: string };
      const owner = await key();
      const other = await key({}, USER_SCOPES, 'yann');
      const narrow = await key({}, ['schedules:write']);
      // Every scope is some route's: the schedule writes' missing scope is shown by a key holding another.
      const otherNarrow = await key({}, ['audit:read']);
      // Real time here (separate processes): the expiry and the short grace are passed by waiting for them.
      const expiring = await key({ expires_at: new Date(Date.now() + 1500).toISOString() });
      const graced = await key();
      const ended = await key();
      await admin('POST', `/keys/${graced.id}/rotate`, { grace_s: 3600 });
      await admin('POST', `/keys/${ended.id}/rotate`, { grace_s: 1 });
      const secrets: Record<Who, string> = { owner: owner.secret, other_owner: other.secret, missing_scope: narrow.secret, expired: expiring.secret, rotated_in_grace: graced.secret, rotated_after_grace: ended.secret, admin: TEST_KEY };
      const alice = client(a.url, owner.secret);
      const created = await alice('POST', '/conversations', { llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, initial_message: 'hello' });
      for (;;) {
        const { body } = await alice('GET', `/conversations/${created.body.id}`);
        if (body.status !== 'running') break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const runs = await alice('GET', `/conversations/${created.body.id}/runs`);
      const events = await alice('GET', `/conversations/${created.body.id}/events`);
      const callback = await alice('POST', `/conversations/${created.body.id}/callbacks`, { url: 'http://127.0.0.1:9/hook' });
      const world: MatrixWorld = { base: b.url, admin, alice, conversationId: created.body.id, runId: runs.body.items[0].id, eventId: events.body.items[0].id, callbackId: callback.body.id, scheduleId: '', llm: { model: 'fake', base_url: llm.url, api_key: 'k' } };
      world.scheduleId = await freshSchedule(world);
      await new Promise((resolve) => setTimeout(resolve, 2000));
      const failures: string[] = [];
      for (const { route, scope } of await keyedRoutes(b.url)) {
        for (const who of EVERYONE) {
          const request = await FIXTURES[route]!.make(world);
          const secret = who === 'missing_scope' && scope === 'schedules:write' ? otherNarrow.secret : secrets[who];
          const answer = await client(b.url, secret)(request.method, request.path, request.body, request.form ? { form: request.form } : {});
          const expected = expectedStatus(route, scope, who);
          if (answer.status !== expected) failures.push(`${route} as ${who}: ${answer.status} (expected ${expected}) ${JSON.stringify(answer.body).slice(0, 160)}`);
        }
      }
      expect(failures).toEqual([]);
    } finally {
      await llm.close();
    }
  });

  it("holds one rpm limit and one spend ledger for both instances", { timeout: 120_000 }, async () => {
    const [a, b] = instances as [SpawnedServer, SpawnedServer];
    const admin = client(a.url, TEST_KEY);
    // Real time here: start well inside a minute, so that the six requests share one window.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 45_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - intoMinute + 200));
    const limited = (await admin('POST', '/keys', { name: 'rita', owner: 'rita', scopes: USER_SCOPES, limits: { rpm: 4 } })).body as { secret: string };
    const statuses: number[] = [];
    for (const base of [a.url, b.url, a.url, b.url, a.url, b.url]) statuses.push((await client(base, limited.secret)('GET', '/conversations')).status);
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
    const refused = await client(b.url, limited.secret)('GET', '/conversations');
    expect(refused.body.details).toMatchObject({ name: 'rpm', limit: 4, used: 4 });

    const llm: FakeLlm = await startFakeLlm({ whenExhausted: { text: 'done', usage: { prompt_tokens: 1000, completion_tokens: 1000 } } });
    try {
      const spender = (await admin('POST', '/keys', { name: 'sam', owner: 'sam', scopes: USER_SCOPES, limits: { max_cost_usd: 0.003, budget_period: 'total' } })).body as { secret: string };
      const llmConfig = { model: 'fake', base_url: llm.url, api_key: 'k', input_cost_per_token: 0.000001, output_cost_per_token: 0.000001 };
      // Each answer costs 0.002: one run on A, one on B; the owner has then spent 0.004 on the two together.
      for (const base of [a.url, b.url]) {
        const sam = client(base, spender.secret);
        const created = await sam('POST', '/conversations', { llm: llmConfig, initial_message: 'spend' });
        expect(created.status).toBe(201);
        await eventually('the run to end', 30_000, async () => (await sam('GET', `/conversations/${created.body.id}`)).body.status !== 'running');
      }
      // Neither instance alone reached 0.003: both refuse, having counted in one ledger.
      for (const base of [a.url, b.url]) {
        const over = await client(base, spender.secret)('POST', '/conversations', { llm: llmConfig, initial_message: 'more' });
        expect(over.status).toBe(429);
        expect(over.body.details.name).toBe('max_cost_usd');
        expect(over.body.details.used).toBeCloseTo(0.004, 9);
      }
    } finally {
      await llm.close();
    }
  });
});
