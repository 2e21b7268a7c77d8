import fs from 'node:fs';
import path from 'node:path';
import { createHmac } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { retryDelayMs } from '../../src/core/webhooks/retry-policy.js';
import { signatureHeader } from '../../src/core/webhooks/webhook-signature.js';
import { startServer, type TestServer } from '../support/agentd.js';
import { WebhookReceiver, type ReceivedWebhook, type Reply } from '../support/webhook-receiver.js';
import { expectError } from '../support/expect-error.js';

const FAST_RETRIES = { AGENTD_WEBHOOK_RETRY_BASE_MS: '20', AGENTD_WEBHOOK_RETRY_MAX_MS: '100', AGENTD_WEBHOOK_TIMEOUT_S: '5', AGENTD_WEBHOOK_RETRY_WINDOW_S: '60' };
const WHSEC = `whsec_${Buffer.from('a 32-byte signing key for tests!').toString('base64')}`;
const PLAIN_SECRET = 'plain string secret ✓';

let server: TestServer;
const receivers: WebhookReceiver[] = [];
const bodies: string[] = [];

async function call(method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown) {
  const response = await server.app.inject({ method, url, headers: server.auth, ...(payload === undefined ? {} : { payload: payload as object }) });
  bodies.push(response.body);
  return { status: response.statusCode, body: response.body === '' ? undefined : response.json() };
}

async function receiver(reply?: (n: number, request: ReceivedWebhook) => Reply): Promise<WebhookReceiver> {
  const started = await WebhookReceiver.start(reply ? { reply } : {});
  receivers.push(started);
  return started;
}

async function conversation(body: Record<string, unknown> = {}): Promise<string> {
  return (await call('POST', '/conversations', body)).body.id;
}

function say(id: string, content: string) {
  return server.services.conversations.append(id, { kind: 'message', source: 'user', role: 'user', content });
}

/** Independent of the server's code: Standard Webhooks' HMAC over "id.timestamp.body". */
function expectedSignature(secret: string, request: ReceivedWebhook): string {
  const key = secret.startsWith('whsec_') ? Buffer.from(secret.slice(6), 'base64') : Buffer.from(secret, 'utf8');
  const signed = `${request.headers['webhook-id']}.${request.headers['webhook-timestamp']}.${request.body}`;
  return `v1,${createHmac('sha256', key).update(signed).digest('base64')}`;
}

beforeAll(async () => {
  server = await startServer({ listen: false, env: FAST_RETRIES });
});
afterEach(async () => {
  for (const started of receivers.splice(0)) await started.close();
});
afterAll(async () => {
  for (const body of bodies) {
    expect(body).not.toContain(WHSEC);
    expect(body).not.toContain(PLAIN_SECRET);
  }
  await server.close();
});

describe('signing', () => {
  it('matches the Standard Webhooks reference vector', () => {
    const header = signatureHeader({ secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', id: 'msg_p5jXN8AQM9LWM0D4loKWxJek', timestamp: 1614265330, body: '{"test": 2432232314}' });
    expect(header).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('backs off exponentially with jitter, capped', () => {
    const policy = { baseMs: 1_000, maxMs: 600_000, windowMs: 86_400_000 };
    expect(retryDelayMs({ retry: 1, policy, random: () => 0 })).toBe(500);
    expect(retryDelayMs({ retry: 1, policy, random: () => 0.999999 })).toBe(1_000);
    expect(retryDelayMs({ retry: 4, policy, random: () => 0.999999 })).toBe(8_000);
    expect(retryDelayMs({ retry: 60, policy, random: () => 0.999999 })).toBe(600_000);
  });
});

describe('POST/GET/DELETE /conversations/{id}/callbacks', () => {
  it('creates, lists (paginated) and never shows a secret, here or on disk', async () => {
    const id = await conversation();
    const first = await call('POST', `/conversations/${id}/callbacks`, { url: 'http://127.0.0.1:9/a', secret: WHSEC, events: ['message'] });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ conversation_id: id, url: 'http://127.0.0.1:9/a', events: ['message'], has_secret: true, origin: 'api', state: 'active', cursor_seq: 0, pending_count: 0, delivered_count: 0 });
    expect(first.body).not.toHaveProperty('secret');
    const second = await call('POST', `/conversations/${id}/callbacks`, { url: 'https://example.invalid/b', secret: PLAIN_SECRET });
    expect(second.body).toMatchObject({ events: null, has_secret: true });

    const page1 = await call('GET', `/conversations/${id}/callbacks?limit=1`);
    expect(page1.body.items.map((item: { id: string }) => item.id)).toEqual([first.body.id]);
    const page2 = await call('GET', `/conversations/${id}/callbacks?limit=1&page_id=${page1.body.next_page_id}`);
    expect(page2.body).toEqual({ items: [expect.objectContaining({ id: second.body.id })], next_page_id: null });

    const onDisk = fs.readdirSync(path.join(server.dataDir, 'webhooks')).map((name) => fs.readFileSync(path.join(server.dataDir, 'webhooks', name), 'utf8')).join('\n');
    expect(onDisk).toContain(first.body.id);
    expect(onDisk).not.toContain(WHSEC.slice(6));
    expect(onDisk).not.toContain(PLAIN_SECRET);
  });

  it('rejects what cannot be delivered to', async () => {
    const id = await conversation();
    for (const url of ['ftp://127.0.0.1/x', 'not a url', 'file:///etc/passwd']) {
      expect((await call('POST', `/conversations/${id}/callbacks`, { url })).body.error, url).toBe('invalid_callback_url');
    }
    expectError(await call('POST', `/conversations/${id}/callbacks`, { url: 'http://127.0.0.1:9', secret: 'whsec_not base64!' }), { status: 422, error: 'invalid_callback_secret', message: /^A secret starting with `whsec_` must continue wi/ });
    expectError(await call('POST', `/conversations/${id}/callbacks`, { url: 'http://127.0.0.1:9', events: ['message_delta'] }), { status: 400, error: 'validation_error', message: /^Invalid body at events\.0: Invalid option: expect/ });
    expectError(await call('POST', `/conversations/${id}/callbacks`, { url: 'http://127.0.0.1:9', extra: 1 }), { status: 400, error: 'validation_error', message: /^Invalid body: Unrecognized key: "extra"\./ });
    expectError(await call('POST', '/conversations/00000000-0000-4000-8000-000000000000/callbacks', { url: 'http://127.0.0.1:9' }), { status: 404, error: 'conversation_not_found', message: /^No conversation with id [0-9a-f-]+\./ });
    expect((await call('DELETE', `/conversations/${id}/callbacks/00000000-0000-4000-8000-000000000000`)).body.error).toBe('callback_not_found');
    expectError(await call('POST', `/conversations/${id}/callbacks/00000000-0000-4000-8000-000000000000/enable`), { status: 404, error: 'callback_not_found', message: /^No callback with id [0-9a-f-]+\./ });
  });
});

describe('delivery', () => {
  it('POSTs every event in order with Standard Webhooks headers, signed with whsec_ and plain secrets', async () => {
    const [a, b] = [await receiver(), await receiver()];
    const id = await conversation({ secrets: { API_TOKEN: 'tok-4b1d7c9e55' } });
    await call('POST', `/conversations/${id}/callbacks`, { url: a.url, secret: WHSEC });
    await call('POST', `/conversations/${id}/callbacks`, { url: b.url, secret: PLAIN_SECRET });
    await call('POST', `/conversations/${id}/messages`, { content: 'first, with tok-4b1d7c9e55 inside', run: false });
    for (let n = 2; n <= 5; n++) say(id, `message ${n}`);
    await a.waitFor(() => a.delivered.length === 5 && b.delivered.length === 5, 'five deliveries each');

    const stored = (await call('GET', `/conversations/${id}/events`)).body.items;
    for (const [target, secret] of [[a, WHSEC], [b, PLAIN_SECRET]] as const) {
      expect(target.seqs).toEqual([1, 2, 3, 4, 5]);
      for (const request of target.delivered) {
        expect(request.headers['content-type']).toBe('application/json');
        expect(request.headers['user-agent']).toMatch(/^agentd\/\d+\.\d+\.\d+/);
        expect(request.headers['webhook-id']).toBe(request.json.event.id);
        expect(Math.abs(Number(request.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60);
        expect(request.headers['webhook-signature']).toBe(expectedSignature(secret, request));
        expect(request.json.conversation_id).toBe(id);
        expect(request.json.event).toEqual(stored[request.json.event.seq - 1]);
      }
    }
    // Payloads go through the same masking as the log.
    expect(a.delivered[0]!.body).not.toContain('tok-4b1d7c9e55');
    expect(a.delivered[0]!.body).toContain('<secret:API_TOKEN>');
  });

  it('retries errors, 5xx, dropped connections and redirects (never followed) until a 2xx, keeping order', async () => {
    const flaky = await receiver((n) => (n === 1 ? 500 : n === 2 ? 'drop' : n === 3 ? { status: 302, headers: { location: '/elsewhere' } } : n === 4 ? 503 : 200));
    const id = await conversation();
    const created = await call('POST', `/conversations/${id}/callbacks`, { url: flaky.url });
    for (let n = 1; n <= 6; n++) say(id, `event ${n}`);
    await flaky.waitFor(() => flaky.delivered.length === 6, 'all six events');
    expect(flaky.seqs).toEqual([1, 2, 3, 4, 5, 6]);
    expect(flaky.requests.map((request) => request.json.event.seq)).toEqual([1, 1, 1, 1, 1, 2, 3, 4, 5, 6]);
    expect(new Set(flaky.requests.slice(0, 5).map((request) => request.headers['webhook-id'])).size).toBe(1);
    expect(flaky.requests.every((request) => request.path === '/hook')).toBe(true);

    // The receiver has answered; the server records the last answer a moment later.
    await flaky.waitFor(async () => (await server.services.callbacks.get(id, created.body.id)).cursor_seq === 6, 'the cursor at 6');
    const log = await call('GET', `/conversations/${id}/callbacks/${created.body.id}/deliveries?limit=2`);
    expect(log.body.items).toEqual([
      { event_id: flaky.delivered[0]!.json.event.id, seq: 1, kind: 'message', state: 'delivered', attempts: 5, last_status: 200, last_error: null, last_attempt_at: expect.any(String), next_retry_at: null },
      expect.objectContaining({ seq: 2, state: 'delivered', attempts: 1 }),
    ]);
    const rest = await call('GET', `/conversations/${id}/callbacks/${created.body.id}/deliveries?page_id=${log.body.next_page_id}`);
    expect(rest.body.items.map((item: { seq: number }) => item.seq)).toEqual([3, 4, 5, 6]);
    expect(rest.body.next_page_id).toBeNull();
    const listed = (await call('GET', `/conversations/${id}/callbacks`)).body.items[0];
    expect(listed).toMatchObject({ cursor_seq: 6, pending_count: 0, delivered_count: 6, failed_attempt_count: 4, last_error: 'HTTP 503' });
  });

  it('a hanging receiver times out without holding up another subscription or the appends', async () => {
    const shared = server;
    server = await startServer({ listen: false, env: { ...FAST_RETRIES, AGENTD_WEBHOOK_TIMEOUT_S: '0.3' } });
    try {
      const hanging = await receiver(() => 'hang');
      const healthy = await receiver();
      const id = await conversation();
      const stuck = await call('POST', `/conversations/${id}/callbacks`, { url: hanging.url });
      await call('POST', `/conversations/${id}/callbacks`, { url: healthy.url });
      const started = Date.now();
      for (let n = 1; n <= 20; n++) await call('POST', `/conversations/${id}/messages`, { content: `m${n}`, run: false });
      expect(Date.now() - started).toBeLessThan(2_000);
      await healthy.waitFor(() => healthy.delivered.length === 20, 'twenty deliveries');
      expect(healthy.seqs).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
      await hanging.waitFor(() => hanging.requests.length >= 2, 'a retry after the timeout');
      expect(hanging.requests.every((request) => request.json.event.seq === 1)).toBe(true);
      const [current, next] = (await call('GET', `/conversations/${id}/callbacks/${stuck.body.id}/deliveries?limit=2`)).body.items;
      expect(current).toMatchObject({ seq: 1, state: 'retrying', last_status: null, last_error: expect.stringMatching(/timed out/) });
      expect(next).toMatchObject({ seq: 2, state: 'pending', attempts: 0 });
    } finally {
      await server.close();
      server = shared;
    }
  });

  it('sends only the kinds asked for, and the cursor moves past the others', async () => {
    const target = await receiver();
    const id = await conversation();
    const created = await call('POST', `/conversations/${id}/callbacks`, { url: target.url, events: ['state_update'] });
    say(id, 'not sent');
    server.services.conversations.append(id, { kind: 'state_update', source: 'system', status: 'idle' });
    say(id, 'not sent either');
    server.services.conversations.append(id, { kind: 'state_update', source: 'system', status: 'finished' });
    say(id, 'last');
    await target.waitFor(() => target.delivered.length === 2, 'two state updates');
    expect(target.delivered.map((request) => [request.json.event.kind, request.json.event.seq])).toEqual([['state_update', 2], ['state_update', 4]]);
    await target.waitFor(async () => (await server.services.callbacks.get(id, created.body.id)).cursor_seq === 5, 'the cursor past the last message');
    expect(target.requests).toHaveLength(2);
  });

  it('deleting a subscription stops its deliveries at once, and deleting the conversation removes them all', async () => {
    const failing = await receiver(() => 500);
    const id = await conversation();
    const created = await call('POST', `/conversations/${id}/callbacks`, { url: failing.url });
    say(id, 'x');
    const other = await call('POST', `/conversations/${id}/callbacks`, { url: failing.url, after_seq: 1 });
    expect(other.body).toMatchObject({ cursor_seq: 1, pending_count: 0 });
    say(id, 'y');
    await failing.waitFor(() => failing.requests.length >= 4, 'some retries');
    expect((await call('DELETE', `/conversations/${id}/callbacks/${created.body.id}`)).status).toBe(204);
    expectError(await call('GET', `/conversations/${id}/callbacks/${created.body.id}/deliveries`), { status: 404, error: 'callback_not_found', message: /^No callback with id [0-9a-f-]+\./ });
    expect((await call('GET', `/conversations/${id}/callbacks`)).body.items.map((item: { id: string }) => item.id)).toEqual([other.body.id]);

    expect((await call('DELETE', `/conversations/${id}`)).status).toBe(204);
    // A delivery already on the wire when DELETE answered may still land: count once the receiver
    // has been quiet for a while (a worker that kept retrying would never let it be, and fail here).
    const seen = await quietCount(failing.requests);
    say(await conversation(), 'elsewhere');
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(failing.requests.length).toBe(seen);
    const files = fs.readdirSync(path.join(server.dataDir, 'webhooks'));
    expect(files.some((name) => name.startsWith(created.body.id) || name.startsWith(other.body.id))).toBe(false);
  });
});

/** The number of requests once no new one arrived for 300 ms (at most ~6 s). */
async function quietCount(requests: readonly unknown[]): Promise<number> {
  let last = -1;
  for (let round = 0; round < 20 && requests.length !== last; round++) {
    last = requests.length;
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  expect(requests.length, 'the receiver never went quiet: deliveries go on after DELETE').toBe(last);
  return last;
}
