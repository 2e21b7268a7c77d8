/**
 * Issue: subscriptions to 169.254.169.254, 10.0.0.1, [fd00:ec2::254], localhost and 0.0.0.0 were
 * accepted, and `user:pw@` credentials in a URL were echoed back in listings. No test here sends
 * a packet anywhere but 127.0.0.1: refusals happen before any connection, and the connect-time
 * check is shown with a resolver that maps a name to 127.0.0.1, against a listener that counts
 * the connections it gets.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { UndiciWebhookClient } from '../../src/adapters/webhooks/undici-webhook-client.js';
import { WebhookTargets } from '../../src/core/webhooks/webhook-targets.js';
import { startServer, type TestServer } from '../support/agentd.js';
import { expectError } from '../support/expect-error.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';
import { requestJson } from '../support/json-api.js';

let server: TestServer | undefined;
const receivers: WebhookReceiver[] = [];

afterEach(async () => {
  await server?.close();
  server = undefined;
  for (const receiver of receivers.splice(0)) await receiver.close();
});

const call = (method: string, route: string, body?: unknown) => requestJson(server!, method, route, body);

describe('webhook targets', () => {
  it('refuses loopback, private, link-local, metadata and unspecified targets by default, at creation', async () => {
    server = await startServer({ env: { AGENTD_WEBHOOK_ALLOW_PRIVATE: 'false' } });
    const id = (await call('POST', '/conversations', {})).body.id as string;
    for (const url of ['http://169.254.169.254/latest/meta-data/', 'http://10.0.0.1/hook', 'http://[fd00:ec2::254]/', 'http://localhost:9/hook', 'http://0.0.0.0/', 'http://127.0.0.1:9/', 'http://[::1]/', 'http://[::ffff:127.0.0.1]/', 'http://192.168.1.1/', 'http://app.localhost/']) {
      expectError(await call('POST', `/conversations/${id}/callbacks`, { url }), { status: 422, error: 'callback_target_refused', message: /^Webhooks are not delivered there: .*AGENTD_WEBHOOK_ALLOW_PRIVATE/ });
    }
    expect((await call('GET', `/conversations/${id}/callbacks`)).body.items).toEqual([]);
  });

  it('lets operators allow local receivers, whole or by CIDR', async () => {
    const receiver = await WebhookReceiver.start();
    receivers.push(receiver);
    server = await startServer({ env: { AGENTD_WEBHOOK_ALLOW_PRIVATE: 'false', AGENTD_WEBHOOK_ALLOW_CIDRS: '127.0.0.0/8' } });
    const id = (await call('POST', '/conversations', { initial_message: 'hi', run: false })).body.id as string;
    expect((await call('POST', `/conversations/${id}/callbacks`, { url: receiver.url })).status).toBe(201);
    await receiver.waitFor(() => receiver.delivered.length >= 1, 'a delivery to an allowed range');
    expectError(await call('POST', `/conversations/${id}/callbacks`, { url: 'http://10.0.0.1/hook' }), { status: 422, error: 'callback_target_refused', message: /10\.0\.0\.1/ });
  });

  it('never echoes URL credentials, in the answer or the list', async () => {
    const receiver = await WebhookReceiver.start();
    receivers.push(receiver);
    server = await startServer();
    const id = (await call('POST', '/conversations', {})).body.id as string;
    const withCredentials = receiver.url.replace('http://', 'http://hook-user:hook-password-123@');
    const created = await call('POST', `/conversations/${id}/callbacks`, { url: withCredentials });
    expect(created.status).toBe(201);
    const listed = await call('GET', `/conversations/${id}/callbacks`);
    for (const text of [JSON.stringify(created.body), JSON.stringify(listed.body)]) {
      expect(text).not.toContain('hook-password-123');
      expect(text).not.toContain('hook-user');
    }
    expect(created.body.url).toBe(receiver.url.replace('http://', 'http://redacted@'));
  });

  it('checks what a name resolves to when it connects (DNS rebinding): no connection is made', async () => {
    let connections = 0;
    const listener = http.createServer((_request, response) => response.end('ok'));
    listener.on('connection', () => (connections += 1));
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const port = (listener.address() as AddressInfo).port;
    // A public-looking name that, at delivery time, resolves to this machine.
    const rebinding = ((_host: string, _options: unknown, callback: (error: null, addresses: { address: string; family: number }[]) => void) =>
      callback(null, [{ address: '127.0.0.1', family: 4 }])) as never;
    const post = (client: UndiciWebhookClient, url: string) => client.post({ url, headers: { 'content-type': 'application/json' }, body: '{}', signal: new AbortController().signal });
    const refusing = new UndiciWebhookClient({ timeoutMs: 5_000, targets: new WebhookTargets({ allowPrivate: false, allowCidrs: [] }), resolve: rebinding });
    const allowing = new UndiciWebhookClient({ timeoutMs: 5_000, targets: new WebhookTargets({ allowPrivate: true, allowCidrs: [] }), resolve: rebinding });
    try {
      const refused = await post(refusing, `http://hooks.example.test:${port}/hook`);
      expect(refused.status).toBeNull();
      expect(refused.error).toMatch(/refused: hooks\.example\.test resolves to 127\.0\.0\.1/);
      const literal = await post(refusing, `http://127.0.0.1:${port}/hook`);
      expect(literal.error).toMatch(/^refused: 127\.0\.0\.1/);
      expect(connections).toBe(0);
      // The same resolver with private targets allowed does connect: the check is what stopped it.
      expect((await post(allowing, `http://hooks.example.test:${port}/hook`)).status).toBe(200);
      expect(connections).toBe(1);
    } finally {
      await refusing.close();
      await allowing.close();
      await new Promise((resolve) => listener.close(resolve));
    }
  });
});
