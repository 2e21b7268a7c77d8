import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, tempDir, TEST_KEY, type TestServer } from '../support/agentd.js';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { connectSse } from '../support/sse-client.js';
import { AgentdClient } from '../../src/client/index.js';
import { adminCall, client, USER_SCOPES, type Answer } from '../support/access-matrix.js';

const clock = { at: Date.parse('2026-03-01T12:00:30.000Z'), now() { return this.at; } };
let server: TestServer;
let llm: FakeLlm;

async function keyFor(owner: string, extra: Record<string, unknown> = {}): Promise<{ id: string; call: ReturnType<typeof client>; secret: string }> {
  const created = await adminCall(server.url)('POST', '/keys', { name: owner, owner, scopes: USER_SCOPES, ...extra });
  expect(created.status).toBe(201);
  return { id: created.body.id, secret: created.body.secret, call: client(server.url, created.body.secret) };
}

async function settled(call: ReturnType<typeof client>, id: string): Promise<Answer> {
  for (;;) {
    const answer = await call('GET', `/conversations/${id}`);
    if (answer.body.status !== 'running') return answer;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

beforeAll(async () => {
  llm = await startFakeLlm({ whenExhausted: { text: 'done', usage: { prompt_tokens: 1000, completion_tokens: 1000 } } });
  server = await startServer({ overrides: { clock } });
});

afterAll(async () => {
  await server?.close();
  await llm?.close();
});

describe('owners', () => {
  it("never shows one owner's conversations to another: lists, counts, the firehose", async () => {
    const alice = await keyFor('carol');
    const bob = await keyFor('dave');
    const secretOfAlice = await alice.call('POST', '/conversations', { title: 'carol-only', llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, initial_message: 'private words' });
    expect(secretOfAlice.status).toBe(201);
    await settled(alice.call, secretOfAlice.body.id);
    const firehose = await connectSse(`${server.url}/events/stream?access_token=${encodeURIComponent(bob.secret)}`);
    const own = await bob.call('POST', '/conversations', { initial_message: 'my own', run: false });
    // Bob's stream reaches his own event: everything stored before it was read, and none of it was Carol's.
    await firehose.waitFor((messages) => messages.some((message) => message.data.includes(own.body.id)));
    firehose.close();
    expect(firehose.messages.map((message) => message.data).join('\n')).not.toContain(secretOfAlice.body.id);
    expect(firehose.messages.map((message) => message.data).join('\n')).not.toContain('private words');

    const listed = await bob.call('GET', '/conversations');
    expect(listed.body.items.map((item: { id: string }) => item.id)).toEqual([own.body.id]);
    expect((await bob.call('GET', '/conversations/count')).body.count).toBe(1);
    expect((await bob.call('GET', '/info')).body.conversations).toMatchObject({ total: 1, by_status: { idle: 1, finished: 0 } });
    expect((await bob.call('GET', `/conversations/${secretOfAlice.body.id}/events`)).status).toBe(404);
    const hook = await alice.call('POST', `/conversations/${secretOfAlice.body.id}/callbacks`, { url: 'http://127.0.0.1:9/hook' });
    expect(hook.body.owner).toBe('carol');
    // The admin sees all, and filters by owner.
    const admin = adminCall(server.url);
    const carols = await admin('GET', '/conversations?owner=carol');
    expect(carols.body.items.map((item: { id: string; owner: string }) => [item.id, item.owner])).toEqual([[secretOfAlice.body.id, 'carol']]);
    // An owner filter from a plain key is ignored: it sees its own owner's.
    expect((await bob.call('GET', '/conversations?owner=carol')).body.items.map((item: { id: string }) => item.id)).toEqual([own.body.id]);
    // The firehose too: the admin's filtered by the owner asked for, a plain key's by its own owner whatever it asks.
    for (const [secret, asked] of [[TEST_KEY, 'dave'], [bob.secret, 'carol']] as const) {
      const filtered = await connectSse(`${server.url}/events/stream?owner=${asked}&access_token=${encodeURIComponent(secret)}`);
      await filtered.waitFor((messages) => messages.some((message) => message.data.includes(own.body.id)));
      filtered.close();
      const seen = filtered.messages.map((message) => message.data).join('\n');
      expect(seen).not.toContain(secretOfAlice.body.id);
      expect(seen).not.toContain('private words');
    }
    // The SDK's firehose takes the filter: Carol's events, up to her conversation's last, and none of Dave's.
    const carolsEvents = (await admin('GET', `/conversations/${secretOfAlice.body.id}`)).body.event_count as number;
    const stop = new AbortController();
    const seen: string[] = [];
    for await (const item of new AgentdClient({ url: server.url, apiKey: TEST_KEY }).events.firehose({ owner: 'carol', signal: stop.signal })) {
      if (!('seq' in item.event)) continue;
      seen.push(item.event.conversation_id);
      if (item.event.conversation_id === secretOfAlice.body.id && item.event.seq === carolsEvents) stop.abort();
    }
    expect(new Set(seen)).toEqual(new Set([secretOfAlice.body.id]));
  });
});

describe('quotas', () => {
  it('counts requests per minute on the clock, with Retry-After until the next minute', async () => {
    const limited = await keyFor('erin', { limits: { rpm: 3 } });
    for (let i = 0; i < 3; i++) expect((await limited.call('GET', '/conversations')).status).toBe(200);
    const refused = await fetch(`${server.url}/conversations`, { headers: { authorization: `Bearer ${limited.secret}` } });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('30');
    expect(await refused.json()).toMatchObject({ error: 'quota_exceeded', details: { name: 'rpm', limit: 3, used: 3, resets_at: '2026-03-01T12:01:00.000Z' } });
    clock.at += 30_000;
    expect((await limited.call('GET', '/conversations')).status).toBe(200);
  });

  it('caps the conversations an owner holds', async () => {
    const limited = await keyFor('frank', { limits: { conversations: 1 } });
    expect((await limited.call('POST', '/conversations', {})).status).toBe(201);
    const refused = await limited.call('POST', '/conversations', {});
    expect(refused.status).toBe(429);
    expect(refused.body.details).toMatchObject({ name: 'conversations', limit: 1, used: 1, resets_at: null });
  });

  it('caps the runs in progress of an owner', async () => {
    const limited = await keyFor('gina', { limits: { concurrent_runs: 1 } });
    const slow = await startFakeLlm({ whenExhausted: { text: 'slow', delayMs: 60_000 } });
    try {
      const first = await limited.call('POST', '/conversations', { llm: { model: 'fake', base_url: slow.url, api_key: 'k' }, initial_message: 'go' });
      expect(first.status).toBe(201);
      const second = await limited.call('POST', '/conversations', { llm: { model: 'fake', base_url: slow.url, api_key: 'k' } });
      const refused = await limited.call('POST', `/conversations/${second.body.id}/messages`, { content: 'go too' });
      expect(refused.status).toBe(429);
      expect(refused.body.details).toMatchObject({ name: 'concurrent_runs', limit: 1, used: 1 });
      // A message that starts no run is not a run.
      expect((await limited.call('POST', `/conversations/${second.body.id}/messages`, { content: 'later', run: false })).status).toBe(202);
      expect((await limited.call('POST', `/conversations/${first.body.id}/pause`)).status).toBe(200);
      await settled(limited.call, first.body.id);
      expect((await limited.call('POST', `/conversations/${second.body.id}/run`)).status).toBe(202);
      await limited.call('POST', `/conversations/${second.body.id}/pause`);
    } finally {
      await slow.close();
    }
  });

  it("pauses a run once its owner's spend reaches the limit, with the reason, and refuses new runs until the period ends", async () => {
    const limited = await keyFor('hugo', { limits: { max_cost_usd: 0.003, budget_period: 'day' } });
    const prices = { input_cost_per_token: 0.000001, output_cost_per_token: 0.000001 };
    // Each answer costs 0.002: a tool call, then another; the second request is not made.
    llm.push({ toolCalls: [{ name: 'bash', arguments: { command: 'true' } }], usage: { prompt_tokens: 1000, completion_tokens: 1000 } }, { toolCalls: [{ name: 'bash', arguments: { command: 'true' } }], usage: { prompt_tokens: 1000, completion_tokens: 1000 } });
    const created = await limited.call('POST', '/conversations', { llm: { model: 'fake', base_url: llm.url, api_key: 'k', ...prices }, initial_message: 'spend' });
    expect(created.status).toBe(201);
    const done = await settled(limited.call, created.body.id);
    expect(done.body.status).toBe('paused');
    const events = await limited.call('GET', `/conversations/${created.body.id}/events?kind=state_update&order=desc&limit=1`);
    expect(events.body.items[0].reason).toMatch(/spend limit/);
    const refused = await fetch(`${server.url}/conversations/${created.body.id}/run`, { method: 'POST', headers: { authorization: `Bearer ${limited.secret}` } });
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({ error: 'quota_exceeded', details: { name: 'max_cost_usd', limit: 0.003, resets_at: '2026-03-02T00:00:00.000Z' } });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    clock.at = Date.parse('2026-03-02T00:00:01.000Z');
    expect((await limited.call('POST', `/conversations/${created.body.id}/run`)).status).toBe(202);
    await settled(limited.call, created.body.id);
  });

  it("holds an owner's spend to the ceilings on every key of theirs, whichever key is used", async () => {
    const capped = await keyFor('iris', { limits: { max_cost_usd: 0.003, budget_period: 'day' } });
    const loose = await keyFor('iris');
    const monthly = await keyFor('iris', { limits: { max_cost_usd: 0.0035, budget_period: 'month' } });
    const other = await keyFor('jack', { limits: { max_cost_usd: 1 } });
    const prices = { input_cost_per_token: 0.000001, output_cost_per_token: 0.000001 };
    // Each answer costs 0.002: after two, both ceilings are reached and the third request is not made.
    llm.push({ toolCalls: [{ name: 'bash', arguments: { command: 'true' } }], usage: { prompt_tokens: 1000, completion_tokens: 1000 } }, { toolCalls: [{ name: 'bash', arguments: { command: 'true' } }], usage: { prompt_tokens: 1000, completion_tokens: 1000 } });
    // The run is started with the key that has no limit of its own: the other keys' ceilings still hold.
    const created = await loose.call('POST', '/conversations', { llm: { model: 'fake', base_url: llm.url, api_key: 'k', ...prices }, initial_message: 'spend' });
    expect(created.status).toBe(201);
    expect((await settled(loose.call, created.body.id)).body.status).toBe('paused');
    const run = (await loose.call('GET', `/conversations/${created.body.id}/runs`)).body.items.at(-1);
    expect(run.usage.cost).toBeCloseTo(0.004, 9);
    // Both reached: the answer names the one that frees up last (the month's), whichever key asks.
    for (const key of [loose, capped, monthly]) {
      const refused = await key.call('POST', `/conversations/${created.body.id}/run`);
      expect(refused.status).toBe(429);
      expect(refused.body.details).toMatchObject({ name: 'max_cost_usd', limit: 0.0035, resets_at: '2026-04-01T00:00:00.000Z' });
    }
    // Another owner's ledger is their own: their run starts.
    const others = await other.call('POST', '/conversations', { llm: { model: 'fake', base_url: llm.url, api_key: 'k', ...prices }, initial_message: 'mine' });
    expect(others.status).toBe(201);
    expect((await settled(other.call, others.body.id)).body.status).not.toBe('paused');
    // Lifting the month's ceiling leaves the day's; deleting that key lifts it too.
    const admin = adminCall(server.url);
    expect((await admin('PATCH', `/keys/${monthly.id}`, { limits: null })).status).toBe(200);
    expect((await loose.call('POST', `/conversations/${created.body.id}/run`)).body.details).toMatchObject({ limit: 0.003, resets_at: '2026-03-03T00:00:00.000Z' });
    expect((await admin('DELETE', `/keys/${capped.id}`)).status).toBe(204);
    expect((await loose.call('POST', `/conversations/${created.body.id}/run`)).status).toBe(202);
    await settled(loose.call, created.body.id);
  });
});

describe('spend on files', () => {
  it('is kept across a restart', { timeout: 60_000 }, async () => {
    const dataDir = tempDir();
    const prices = { input_cost_per_token: 0.000001, output_cost_per_token: 0.000001 };
    let restarted = await startServer({ dataDir, overrides: { clock } });
    try {
      const made = await adminCall(restarted.url)('POST', '/keys', { name: 'kim', owner: 'kim', scopes: USER_SCOPES, limits: { max_cost_usd: 0.002, budget_period: 'total' } });
      const kim = client(restarted.url, made.body.secret);
      const created = await kim('POST', '/conversations', { llm: { model: 'fake', base_url: llm.url, api_key: 'k', ...prices }, initial_message: 'spend it all' });
      expect(created.status).toBe(201);
      await settled(kim, created.body.id);
      expect((await kim('POST', `/conversations/${created.body.id}/run`)).status).toBe(429);
      await restarted.close();
      restarted = await startServer({ dataDir, overrides: { clock } });
      const refused = await client(restarted.url, made.body.secret)('POST', `/conversations/${created.body.id}/run`);
      expect(refused.status).toBe(429);
      expect(refused.body.details).toMatchObject({ name: 'max_cost_usd', limit: 0.002, resets_at: null });
      expect(refused.body.details.used).toBeCloseTo(0.002, 9);
    } finally {
      await restarted.close();
    }
  });
});
