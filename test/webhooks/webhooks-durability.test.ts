import fs from 'node:fs';
import path from 'node:path';
import { createHmac } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort, startServer, tempDir, type TestServer } from '../support/agentd.js';
import { WebhookReceiver, type ReceivedWebhook } from '../support/webhook-receiver.js';

const FAST_RETRIES = { AGENTD_WEBHOOK_RETRY_BASE_MS: '20', AGENTD_WEBHOOK_RETRY_MAX_MS: '80', AGENTD_WEBHOOK_TIMEOUT_S: '5', AGENTD_WEBHOOK_RETRY_WINDOW_S: '60' };
const SECRET = 'restart-proof secret';
const WHSEC = `whsec_${Buffer.from('server-wide signing key, 32 byte').toString('base64')}`;

const cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

async function start(options: { dataDir: string; env?: Record<string, string> }): Promise<TestServer & { closed: boolean }> {
  const server = Object.assign(await startServer({ listen: false, dataDir: options.dataDir, env: { ...FAST_RETRIES, ...options.env } }), { closed: false });
  const close = server.close.bind(server);
  server.close = async () => {
    if (server.closed) return;
    server.closed = true;
    await close();
  };
  cleanup.push(() => server.close());
  return server;
}

async function receiver(options: { port?: number; reply?: (n: number, request: ReceivedWebhook) => number } = {}): Promise<WebhookReceiver> {
  const started = await WebhookReceiver.start(options);
  cleanup.push(() => started.close());
  return started;
}

async function call(server: TestServer, method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown) {
  const response = await server.app.inject({ method, url, headers: server.auth, ...(payload === undefined ? {} : { payload: payload as object }) });
  return { status: response.statusCode, body: response.body === '' ? undefined : response.json() };
}

function say(server: TestServer, id: string, content: string) {
  server.services.conversations.append(id, { kind: 'message', source: 'user', role: 'user', content });
}

async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 8_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function signature(secret: string, request: ReceivedWebhook): string {
  const key = secret.startsWith('whsec_') ? Buffer.from(secret.slice(6), 'base64') : Buffer.from(secret, 'utf8');
  return `v1,${createHmac('sha256', key).update(`${request.headers['webhook-id']}.${request.headers['webhook-timestamp']}.${request.body}`).digest('base64')}`;
}

describe('durability', () => {
  it('undelivered events survive a restart and arrive, in order, once the receiver is up', async () => {
    const dataDir = tempDir();
    const port = await freePort();
    const first = await start({ dataDir });
    const id = (await call(first, 'POST', '/conversations', {})).body.id;
    const callback = (await call(first, 'POST', `/conversations/${id}/callbacks`, { url: `http://127.0.0.1:${port}/hook`, secret: SECRET })).body;
    for (let n = 1; n <= 3; n++) say(first, id, `before restart ${n}`);
    await until(async () => (await first.services.callbacks.get(id, callback.id)).failed_attempt_count >= 2, 'failed attempts while the receiver is down');
    const [head] = (await call(first, 'GET', `/conversations/${id}/callbacks/${callback.id}/deliveries`)).body.items;
    expect(head).toMatchObject({ seq: 1, state: 'retrying', last_status: null, last_error: expect.stringMatching(/refused/i) });
    await first.close();

    const second = await start({ dataDir });
    say(second, id, 'after restart, receiver still down');
    const up = await receiver({ port });
    await up.waitFor(() => up.delivered.length === 4, 'four deliveries');
    expect(up.seqs).toEqual([1, 2, 3, 4]);
    for (const request of up.delivered) expect(request.headers['webhook-signature']).toBe(signature(SECRET, request));
    await until(async () => (await second.services.callbacks.get(id, callback.id)).cursor_seq === 4, 'the cursor at 4');
    const log = (await call(second, 'GET', `/conversations/${id}/callbacks/${callback.id}/deliveries`)).body.items;
    expect(log.map((item: { state: string }) => item.state)).toEqual(['delivered', 'delivered', 'delivered', 'delivered']);
    expect(log[0].attempts).toBeGreaterThan(head.attempts);
    expect(await second.services.callbacks.get(id, callback.id)).toMatchObject({ cursor_seq: 4, delivered_count: 4, pending_count: 0 });
  });

  it('shutdown aborts an attempt in flight at once; it is made again after the restart', async () => {
    const dataDir = tempDir();
    let hang = true;
    const target = await WebhookReceiver.start();
    target.reply = () => (hang ? 'hang' : 200);
    cleanup.push(() => target.close());
    const slow = { AGENTD_WEBHOOK_TIMEOUT_S: '30' };
    const first = await start({ dataDir, env: slow });
    const id = (await call(first, 'POST', '/conversations', {})).body.id;
    const callback = (await call(first, 'POST', `/conversations/${id}/callbacks`, { url: target.url })).body;
    say(first, id, 'in flight at shutdown');
    await target.waitFor(() => target.requests.length === 1, 'the attempt to arrive');
    const closing = Date.now();
    await first.close();
    expect(Date.now() - closing).toBeLessThan(2_000);

    hang = false;
    const second = await start({ dataDir, env: slow });
    await target.waitFor(() => target.delivered.length === 1, 'the event after the restart');
    await until(async () => (await second.services.callbacks.get(id, callback.id)).cursor_seq === 1, 'the cursor at 1');
    expect(target.requests.map((request) => request.headers['webhook-id'])).toEqual([target.delivered[0]!.headers['webhook-id'], target.delivered[0]!.headers['webhook-id']]);
    expect(await second.services.callbacks.get(id, callback.id)).toMatchObject({ cursor_seq: 1, delivered_count: 1, failed_attempt_count: 0 });
  });

  it('marks a subscription failing when the retry window is over, sends nothing more, and resumes on enable', async () => {
    let receiving = false;
    const target = await receiver({ reply: () => (receiving ? 200 : 503) });
    const server = await start({ dataDir: tempDir(), env: { AGENTD_WEBHOOK_RETRY_WINDOW_S: '0.3' } });
    const id = (await call(server, 'POST', '/conversations', {})).body.id;
    const callback = (await call(server, 'POST', `/conversations/${id}/callbacks`, { url: target.url })).body;
    for (let n = 1; n <= 3; n++) say(server, id, `m${n}`);
    await until(async () => (await server.services.callbacks.get(id, callback.id)).state === 'failing', 'state failing');

    const listed = (await call(server, 'GET', `/conversations/${id}/callbacks`)).body.items[0];
    expect(listed).toMatchObject({ state: 'failing', failing_since: expect.any(String), pending_count: 3, last_error: 'HTTP 503' });
    const log = (await call(server, 'GET', `/conversations/${id}/callbacks/${callback.id}/deliveries`)).body.items;
    expect(log).toEqual([
      expect.objectContaining({ seq: 1, state: 'failed', last_status: 503, next_retry_at: null }),
      expect.objectContaining({ seq: 2, state: 'pending' }),
      expect.objectContaining({ seq: 3, state: 'pending' }),
    ]);
    expect(log[0].attempts).toBeGreaterThanOrEqual(2);
    const seen = target.requests.length;
    say(server, id, 'm4');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(target.requests).toHaveLength(seen);

    receiving = true;
    const enabled = await call(server, 'POST', `/conversations/${id}/callbacks/${callback.id}/enable`);
    expect(enabled).toMatchObject({ status: 200, body: { state: 'active', failing_since: null } });
    await target.waitFor(() => target.delivered.length === 4, 'everything after enable');
    expect(target.seqs).toEqual([1, 2, 3, 4]);
  });
});

describe('server-wide callbacks (AGENTD_WEBHOOK_URLS)', () => {
  it('deliver every conversation\'s events from when they are configured, signed with AGENTD_WEBHOOK_SECRET', async () => {
    const dataDir = tempDir();
    const target = await receiver();
    const before = await start({ dataDir });
    const old = (await call(before, 'POST', '/conversations', {})).body.id;
    say(before, old, 'before the URL was configured');
    await before.close();

    const env = { AGENTD_WEBHOOK_URLS: `${target.url}, `, AGENTD_WEBHOOK_SECRET: WHSEC };
    const server = await start({ dataDir, env });
    say(server, old, 'after');
    const fresh = (await call(server, 'POST', '/conversations', {})).body.id;
    await call(server, 'POST', `/conversations/${fresh}/messages`, { content: 'hello', run: false });
    await target.waitFor(() => target.delivered.length === 2, 'one event of each conversation');
    expect(target.delivered.map((request) => [request.json.conversation_id, request.json.event.seq]).sort()).toEqual([[fresh, 1], [old, 2]].sort());
    for (const request of target.delivered) expect(request.headers['webhook-signature']).toBe(signature(WHSEC, request));
    const cursorOf = async (conversationId: string) => (await server.services.callbacks.list(conversationId, { limit: 10 })).items[0]?.cursor_seq;
    await until(async () => (await cursorOf(old)) === 2 && (await cursorOf(fresh)) === 1, 'both cursors to move');

    const [own] = (await call(server, 'GET', `/conversations/${fresh}/callbacks`)).body.items;
    expect(own).toMatchObject({ url: target.url, origin: 'server', has_secret: true, events: null, delivered_count: 1 });
    expect((await call(server, 'DELETE', `/conversations/${fresh}/callbacks/${own.id}`)).body.error).toBe('callback_managed_by_server');
    expect((await call(server, 'DELETE', `/conversations/${fresh}`)).status).toBe(204);
    expect(fs.readdirSync(path.join(dataDir, 'webhooks')).some((name) => name.startsWith(own.id))).toBe(false);
    await server.close();

    const sentBefore = target.requests.length;
    const again = await start({ dataDir, env });
    say(again, old, 'third');
    await target.waitFor(() => target.delivered.length === 3, 'the next event');
    await new Promise((resolve) => setTimeout(resolve, 100));
    // Nothing delivered before the restart is sent again.
    expect(target.requests.slice(sentBefore).map((request) => [request.json.conversation_id, request.json.event.seq])).toEqual([[old, 3]]);
    await again.close();

    const without = await start({ dataDir });
    expect((await call(without, 'GET', `/conversations/${old}/callbacks`)).body.items).toEqual([]);
  });
});
