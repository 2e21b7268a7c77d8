/**
 * Three built servers on one PostgreSQL database; a run is under way on its owner (waiting for
 * a slow LLM, which answers meanwhile) when PostgreSQL is stopped for ~10 s. Meanwhile every
 * request, to the owner and to the other instances, is answered within a bounded time: 503 with
 * Retry-After for what needs the database, 200 for what does not; never a 500, never a hang.
 * After the restart the run is paused saying the database was unreachable (no failover: its
 * instance never stopped), it can be resumed, and the event log has every event once, in order.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { tempDir, type SpawnedServer } from '../support/agentd.js';
import { findPostgres, startPostgres, type PostgresCluster } from '../support/postgres-cluster.js';
import { clusterRequest, eventually as until, startInstance, type ClusterAnswer } from '../support/cluster-instances.js';

const pg = findPostgres();
const skipReason = 'missing' in pg ? pg.missing : null;
if (skipReason) console.warn(`test/cluster/cluster-database-outage.test.ts: skipped (${skipReason})`);

/** Generous: a request that needs the database is refused, not held until it is back. */
const ANSWER_WITHIN_MS = 8_000;
const api = (base: string, path: string, init: RequestInit = {}) => clusterRequest(base, path, init, ANSWER_WITHIN_MS);

describe.skipIf(skipReason !== null)('PostgreSQL stopped mid-run', () => {
  let cluster: PostgresCluster;
  let llm: FakeLlm;
  const servers: SpawnedServer[] = [];

  beforeAll(async () => {
    cluster = await startPostgres(pg as Exclude<typeof pg, { missing: string }>);
  }, 60_000);

  afterAll(async () => {
    for (const server of servers) server.child.kill('SIGKILL');
    await llm?.close();
    await cluster?.stop();
  }, 60_000);

  it('answers 503 with Retry-After (or 200) while the database is down, and loses no event', { timeout: 240_000 }, async () => {
    const databaseUrl = await cluster.createDatabase();
    const workdirs = tempDir('agentd-outage-workdirs-');
    // The first answer comes while the database is down (stopped right after the run starts, for 10 s).
    llm = await startFakeLlm([{ text: 'an answer that cannot be recorded', delayMs: 5_000 }, { text: 'after the outage' }]);
    const start = () => startInstance({ databaseUrl, workdirs, leaseTtlS: 3 }, { dataDir: tempDir() });
    const [a, b, c] = await Promise.all([start(), start(), start()]);
    servers.push(a!, b!, c!);

    const created = await api(a!.url, '/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, initial_message: 'run it', run: true }) });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    await until('the run waiting for the LLM on the owner', 30_000, async () => {
      const events = (await api(a!.url, `/conversations/${id}/events?limit=1000`)).body.items as { kind: string }[];
      return events.some((event) => event.kind === 'system_prompt');
    });

    await cluster.pause();
    const answers: { who: string; what: string; answer: ClusterAnswer }[] = [];
    const probes: [string, string, RequestInit][] = [
      ['GET', `/conversations/${id}`, {}],
      ['GET', `/conversations/${id}/events?limit=10`, {}],
      ['GET', `/conversations/${id}/runs`, {}],
      ['POST', `/conversations/${id}/messages`, { method: 'POST', body: JSON.stringify({ content: 'while the database is down' }) }],
      ['GET', '/conversations', {}],
    ];
    const pausedAt = Date.now();
    try {
      while (Date.now() - pausedAt < 10_000) {
        for (const [who, server] of [['owner', a!], ['non-owner B', b!], ['non-owner C', c!]] as const) {
          for (const [method, path, init] of probes) {
            const answer = await api(server.url, path, init).catch((error: unknown) => ({ status: 0, text: String(error), body: null, headers: new Headers(), ms: ANSWER_WITHIN_MS }));
            answers.push({ who, what: `${method} ${path}`, answer });
          }
        }
      }
    } finally {
      await cluster.resume();
    }

    const wrong = answers.filter(({ answer }) => answer.status !== 200 && answer.status !== 503).map(({ who, what, answer }) => `${who} ${what}: ${answer.status} ${answer.text.slice(0, 200)}`);
    expect(wrong).toEqual([]);
    const refused = answers.filter(({ answer }) => answer.status === 503);
    expect(refused.length).toBeGreaterThan(0);
    for (const { who, what, answer } of refused) {
      expect(answer.headers.get('retry-after'), `${who} ${what}`).toMatch(/^[1-9]\d*$/);
      expect(answer.body, `${who} ${what}`).toMatchObject({ error: expect.any(String), message: expect.any(String) });
    }
    // Non-owners could not even look the owner up: they say the database is down.
    expect(refused.filter(({ who }) => who !== 'owner').some(({ answer }) => answer.body.error === 'database_unavailable')).toBe(true);
    console.info(`database down 10 s: ${answers.length} requests, ${refused.length} answered 503, slowest ${Math.max(...answers.map(({ answer }) => answer.ms))} ms`);

    // Back: the run paused on its owner, which never stopped: the log says the database was unreachable, not a failover.
    const [run] = await until('the run paused after the outage', 90_000, async () => {
      const runs = (await api(b!.url, `/conversations/${id}/runs`)).body?.items as { status: string; outcome: string | null }[] | undefined;
      if (!runs?.length || runs.some((item) => item.status === 'running')) return undefined;
      // The run record is saved before the state_update that says why: both, before looking.
      const events = (await api(c!.url, `/conversations/${id}/events?limit=1000`)).body.items as { kind: string; status?: string }[];
      return events.some((event) => event.kind === 'state_update' && event.status === 'paused') ? runs : undefined;
    }).catch(async (error: unknown) => {
      // What each instance says, for the report.
      const runs = await api(b!.url, `/conversations/${id}/runs`).catch(() => null);
      const events = await api(b!.url, `/conversations/${id}/events?limit=1000`).catch(() => null);
      const kinds = (events?.body?.items as { seq: number; kind: string; status?: string; content?: string }[] | undefined)?.map((event) => `${event.seq} ${event.kind} ${event.status ?? ''} ${(event.content ?? '').slice(0, 80)}`);
      const notes = a!.output().split('\n').filter((line) => !line.includes('ECONNREFUSED') && !line.includes('request answered 503') && !line.includes('CONNECTION_'));
      console.error(`runs: ${runs?.text}\nevents: ${kinds?.join('\n')}\nowner's log:\n${notes.join('\n').slice(-12000)}`);
      throw error;
    });
    expect(run).toMatchObject({ status: 'paused', outcome: 'database_unavailable' });
    const events = (await api(c!.url, `/conversations/${id}/events?limit=1000`)).body.items as { kind: string; status?: string; reason?: string; is_error?: boolean; content?: string }[];
    const pausedBy = events.filter((event) => event.kind === 'state_update' && event.status === 'paused');
    expect(pausedBy).toHaveLength(1);
    expect(pausedBy[0]!.reason).toContain('database was unreachable');
    expect(events.some((event) => event.content === 'an answer that cannot be recorded')).toBe(false);
    for (const server of [a!, b!, c!]) expect((await api(server.url, '/metrics')).text).toMatch(/^agentd_cluster_failovers_total 0$/m);

    // It is resumable, from any instance: the run carries on where it stopped. An instance whose
    // pool is still getting its connections back answers 503 with Retry-After, as in the outage:
    // a client tries again then, and the resume is accepted once, never refused for another reason.
    let resumed = await api(b!.url, `/conversations/${id}/run`, { method: 'POST', body: '{}' });
    for (const deadline = Date.now() + 30_000; resumed.status === 503 && Date.now() < deadline; ) {
      expect(resumed.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
      await new Promise((resolve) => setTimeout(resolve, 200));
      resumed = await api(b!.url, `/conversations/${id}/run`, { method: 'POST', body: '{}' });
    }
    expect(resumed.status, resumed.text.slice(0, 300)).toBe(202);
    await until('the resumed run ended', 60_000, async () => {
      const runs = (await api(c!.url, `/conversations/${id}/runs`)).body?.items as { status: string }[] | undefined;
      return runs?.length === 2 && runs.every((item) => item.status !== 'running') ? runs : undefined;
    });
    for (const server of [a!, b!, c!]) {
      const events = (await api(server.url, `/conversations/${id}/events?limit=1000`)).body.items as { id: string; seq: number }[];
      expect(events.map((event) => event.seq)).toEqual(events.map((_, i) => i + 1));
      expect(new Set(events.map((event) => event.id)).size).toBe(events.length);
    }
  });
});
