import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from '../support/agentd.js';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { adminCall, client, EVERYONE, expectedStatus, FIXTURES, freshSchedule, keyedRoutes, USER_SCOPES, type Answer, type MatrixWorld, type Who } from '../support/access-matrix.js';

/** Keys, quotas and the audit log read this clock: the test moves it past expiries and grace periods. */
const clock = { at: Date.parse('2026-03-01T12:00:00.000Z'), now() { return this.at; } };

let server: TestServer;
let llm: FakeLlm;
let world: MatrixWorld;
const secrets = {} as Record<Who, string>;
const keyIds = {} as Record<Who, string>;
/** Every scope is some route's: a route that needs the narrow key's own scope is called with a key holding another. */
const NARROW_SCOPE = 'schedules:write';
const otherNarrow = { id: '', secret: '' };
const callerKey = (who: Who, scope: string | null) => (who === 'missing_scope' && scope === NARROW_SCOPE ? otherNarrow : { id: keyIds[who], secret: secrets[who] });

async function makeKey(owner: string, scopes: string[], extra: Record<string, unknown> = {}): Promise<{ id: string; secret: string }> {
  const created = await adminCall(server.url)('POST', '/keys', { name: owner, owner, scopes, ...extra });
  expect(created.status).toBe(201);
  expect(created.body.secret).toMatch(/^agd_/);
  return { id: created.body.id, secret: created.body.secret };
}

async function waitIdle(call: (method: string, path: string) => Promise<Answer>, id: string): Promise<void> {
  for (;;) {
    const { body } = await call('GET', `/conversations/${id}`);
    if (body.status !== 'running') return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

beforeAll(async () => {
  llm = await startFakeLlm();
  server = await startServer({ overrides: { clock } });
  const alice = await makeKey('alice', USER_SCOPES);
  const bob = await makeKey('bob', USER_SCOPES);
  const narrow = await makeKey('alice', [NARROW_SCOPE]);
  Object.assign(otherNarrow, await makeKey('alice', ['audit:read']));
  const expiring = await makeKey('alice', USER_SCOPES, { expires_at: new Date(clock.at + 30_000).toISOString() });
  const graced = await makeKey('alice', USER_SCOPES);
  const ended = await makeKey('alice', USER_SCOPES);
  const admin = adminCall(server.url);
  expect((await admin('POST', `/keys/${graced.id}/rotate`, { grace_s: 3600 })).status).toBe(200);
  expect((await admin('POST', `/keys/${ended.id}/rotate`, { grace_s: 60 })).status).toBe(200);
  clock.at += 120_000;
  Object.assign(secrets, { owner: alice.secret, other_owner: bob.secret, missing_scope: narrow.secret, expired: expiring.secret, rotated_in_grace: graced.secret, rotated_after_grace: ended.secret });
  Object.assign(keyIds, { owner: alice.id, other_owner: bob.id, missing_scope: narrow.id, expired: expiring.id, rotated_in_grace: graced.id, rotated_after_grace: ended.id, admin: 'master' });

  const aliceCall = client(server.url, alice.secret);
  const created = await aliceCall('POST', '/conversations', { llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, initial_message: 'hello' });
  expect(created.status).toBe(201);
  expect(created.body.owner).toBe('alice');
  await waitIdle(aliceCall, created.body.id);
  const runs = await aliceCall('GET', `/conversations/${created.body.id}/runs`);
  const events = await aliceCall('GET', `/conversations/${created.body.id}/events`);
  const callback = await aliceCall('POST', `/conversations/${created.body.id}/callbacks`, { url: 'http://127.0.0.1:9/hook' });
  world = { base: server.url, admin, alice: aliceCall, conversationId: created.body.id, runId: runs.body.items[0].id, eventId: events.body.items[0].id, callbackId: callback.body.id, scheduleId: '', llm: { model: 'fake', base_url: llm.url, api_key: 'k' } };
  world.scheduleId = await freshSchedule(world);
}, 60_000);

afterAll(async () => {
  await server?.close();
  await llm?.close();
});

describe('every route × every kind of caller', () => {
  const made: { who: Who; keyId: string; method: string; route: string; status: number }[] = [];

  it('answers each the status the matrix expects', async () => {
    const routes = await keyedRoutes(server.url);
    const missing = routes.filter(({ route }) => !FIXTURES[route]).map(({ route }) => route);
    expect(missing, 'routes without a fixture in test/support/access-matrix.ts').toEqual([]);
    const failures: string[] = [];
    for (const { route, scope } of routes) {
      for (const who of EVERYONE) {
        const request = await FIXTURES[route]!.make(world);
        const key = callerKey(who, scope);
        const call = who === 'admin' ? world.admin : client(server.url, key.secret);
        const answer = await call(request.method, request.path, request.body, request.form ? { form: request.form } : {});
        const expected = expectedStatus(route, scope, who);
        if (answer.status !== expected) failures.push(`${route} as ${who}: ${answer.status} (expected ${expected}) ${JSON.stringify(answer.body).slice(0, 200)}`);
        if (answer.status === 403 && who === 'missing_scope') expect(answer.body).toMatchObject({ error: 'insufficient_scope', details: { scope } });
        made.push({ who, keyId: key.id, method: request.method, route, status: answer.status });
      }
    }
    expect(failures).toEqual([]);
  }, 60_000);

  it('keeps every write and every refusal of the matrix in the audit log', async () => {
    // A stream's entry is written once the server has seen its client leave: read again until then.
    for (let attempt = 0; ; attempt++) {
      const unmatched = await unmatchedActions();
      if (unmatched.length === 0 || attempt === 50) return expect(unmatched).toEqual([]);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });

  async function unmatchedActions(): Promise<string[]> {
    const entries: any[] = [];
    for (let page: string | null = ''; page !== null; ) {
      const answer = await world.admin('GET', `/audit?limit=1000${page ? `&page_id=${page}` : ''}`);
      expect(answer.status).toBe(200);
      entries.push(...answer.body.items);
      page = answer.body.next_page_id;
    }
    const toPattern = (route: string) => route.split(' ')[1]!.replace(/\{(\w+)\}/g, ':$1').replace(':path', '*');
    const unmatched: string[] = [];
    for (const action of made) {
      const write = action.method !== 'GET';
      const refused = action.status === 401 || action.status === 403 || (action.who === 'other_owner' && action.status === 404);
      const expected: (number | null)[] = [...(write || refused ? [action.status] : []), ...(action.who === 'rotated_in_grace' ? [null] : [])];
      for (const status of expected) {
        const index = entries.findIndex((entry) => entry.method === action.method && entry.status === status && entry.key_id === action.keyId && entry.route === toPattern(action.route));
        if (index === -1) unmatched.push(`${action.method} ${action.route} as ${action.who} (${status})`);
        else entries.splice(index, 1);
      }
    }
    return unmatched;
  }
});
