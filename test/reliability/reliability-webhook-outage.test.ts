/**
 * R2 webhook outage: an agent run keeps producing events while the receiver goes down (connection
 * refused), then comes back flaky (503s and dropped connections), then healthy. Every event
 * reaches every subscription (a whsec_-signed one, a plain-secret one with a kind filter, a
 * server-wide one), in order, one at a time (event N+1 never before N got a 2xx), each body the
 * stored event byte for byte, each signature valid under an HMAC computed here.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OpenAiLlmClient } from '../../src/adapters/llm/openai-llm.js';
import { startFakeLlm, type FakeLlm, type FakeTurn } from '../fake-llm/fake-llm-server.js';
import { freePort, startServer, type TestServer } from '../support/agentd.js';
import { allEvents, apiClient, expectedSignature, sleep, until, type Api } from '../support/reliability.js';
import { WebhookReceiver, type ReceivedWebhook, type Reply } from '../support/webhook-receiver.js';

const STEPS = 30;
const WHSEC = `whsec_${Buffer.from('a signing key of thirty-two bytes').toString('base64')}`;
const PLAIN = 'plain text secret';
const SERVER_SECRET = `whsec_${Buffer.from('the server-wide key, also bytes!').toString('base64')}`;
const FILTER = ['action', 'observation', 'message'];

let llm: FakeLlm;
let server: TestServer;
let api: Api;
let port: number;
const receivers: WebhookReceiver[] = [];
/** Every request any receiver got, with the status it was answered (0: connection dropped). */
const received: Array<{ request: ReceivedWebhook; status: number }> = [];

async function startReceiver(reply: (n: number) => Reply): Promise<WebhookReceiver> {
  const receiver = await WebhookReceiver.start({ port });
  receiver.reply = (n, request) => {
    const answer = reply(n);
    received.push({ request, status: typeof answer === 'number' ? answer : 0 });
    return answer;
  };
  receivers.push(receiver);
  return receiver;
}

beforeAll(async () => {
  port = await freePort();
  const turns: FakeTurn[] = Array.from({ length: STEPS }, (_, i) => ({ text: `step ${i}`, toolCalls: [{ name: 'bash', arguments: { command: `sleep 0.08; echo step-${i}` } }] }));
  llm = await startFakeLlm([...turns, { text: 'All steps done.' }]);
  server = await startServer({
    env: {
      AGENTD_WEBHOOK_RETRY_BASE_MS: '20',
      AGENTD_WEBHOOK_RETRY_MAX_MS: '150',
      AGENTD_WEBHOOK_TIMEOUT_S: '2',
      AGENTD_WEBHOOK_RETRY_WINDOW_S: '120',
      AGENTD_WEBHOOK_URLS: `http://127.0.0.1:${port}/server`,
      AGENTD_WEBHOOK_SECRET: SERVER_SECRET,
    },
    overrides: { llm: new OpenAiLlmClient({ retryBaseDelayMs: 20, retryMaxDelayMs: 100 }) },
  });
  api = apiClient(server.url);
});
afterAll(async () => {
  await server?.close();
  await llm?.close();
  for (const receiver of receivers) await receiver.close();
});

describe('webhook delivery through a receiver outage', () => {
  it('delivers every event, in order, one at a time, signed, once the receiver is back', async () => {
    let receiver = await startReceiver(() => 200);
    const created = await api.post('/conversations', { llm: { model: 'fake', base_url: llm.url, api_key: 'k' } });
    const id = created.json().id as string;
    const subscriptions = [
      { path: '/signed', body: { url: `http://127.0.0.1:${port}/signed`, secret: WHSEC }, secret: WHSEC, kinds: null },
      { path: '/filtered', body: { url: `http://127.0.0.1:${port}/filtered`, secret: PLAIN, events: FILTER }, secret: PLAIN, kinds: FILTER },
    ];
    const callbackIds: string[] = [];
    for (const subscription of subscriptions) {
      const callback = await api.post(`/conversations/${id}/callbacks`, subscription.body);
      expect(callback.status, callback.text).toBe(201);
      callbackIds.push(callback.json().id);
    }
    expect((await api.post(`/conversations/${id}/messages`, { content: 'go through the steps' })).status).toBe(202);

    // Up for a while, then down (connection refused) while the run goes on.
    const deliveredTo = (path: string) => received.filter((entry) => entry.request.path === path && entry.status === 200).length;
    await until(() => ['/signed', '/filtered', '/server'].every((path) => deliveredTo(path) >= 3), 'a few deliveries before the outage');
    await receiver.close();
    const downAt = Date.now();
    const eventsBeforeDown = (await api.get(`/conversations/${id}`)).json().event_count as number;
    await sleep(1500);
    const eventsWhileDown = (await api.get(`/conversations/${id}`)).json().event_count - eventsBeforeDown;
    // Back, but flaky at first: 503s and dropped connections, then healthy.
    receiver = await startReceiver((n) => (n <= 12 ? (n % 3 === 0 ? 'drop' : 503) : 200));
    const upAt = Date.now();

    await until(async () => (await api.get(`/conversations/${id}`)).json().status === 'idle', 'the run to end', 30_000);
    const { events, texts } = await allEvents(api, id);
    const textBySeq = new Map(events.map((event, index) => [event.seq, texts[index]!]));
    const expectations = [...subscriptions, { path: '/server', secret: SERVER_SECRET, kinds: null }].map((subscription) => ({
      ...subscription,
      seqs: events.filter((event) => !subscription.kinds || subscription.kinds.includes(event.kind)).map((event) => event.seq),
    }));
    const firstDelivered = (path: string) => {
      const seen = new Set<string>();
      return received.filter(({ request, status }) => request.path === path && status === 200 && !seen.has(String(request.headers['webhook-id'])) && seen.add(String(request.headers['webhook-id'])));
    };
    await until(() => expectations.every(({ path, seqs }) => firstDelivered(path).length >= seqs.length), 'every event at every subscription', 30_000);
    await sleep(300);

    const problems: string[] = [];
    for (const { path, secret, seqs } of expectations) {
      const requests = received.filter((entry) => entry.request.path === path);
      // In order, each event once (deduplicated by webhook-id), and nothing else.
      expect(firstDelivered(path).map(({ request }) => request.json.event.seq), path).toEqual(seqs);
      // One at a time: every attempt is at the first event not yet acknowledged with a 2xx.
      let head = 0;
      for (const { request, status } of requests) {
        if (request.json.event.seq !== seqs[head]) problems.push(`${path}: attempt at seq ${request.json.event.seq} while seq ${seqs[head]} was not delivered`);
        else if (status === 200) head += 1;
      }
      for (const { request } of requests) {
        const where = `${path} seq ${request.json.event.seq}`;
        if (request.headers['webhook-signature'] !== expectedSignature(secret, request)) problems.push(`${where}: bad signature`);
        if (request.headers['webhook-id'] !== request.json.event.id) problems.push(`${where}: webhook-id is not the event id`);
        if (Math.abs(Number(request.headers['webhook-timestamp']) - request.at / 1000) > 5) problems.push(`${where}: webhook-timestamp is off`);
        if (request.json.conversation_id !== id) problems.push(`${where}: wrong conversation_id`);
        const eventText = request.body.slice(request.body.indexOf('"event":') + '"event":'.length, -1);
        if (eventText !== textBySeq.get(request.json.event.seq)) problems.push(`${where}: the body is not the stored event`);
      }
    }
    expect(problems).toEqual([]);

    // The outage was real: events were appended while down, attempts failed, and the API says so.
    expect(eventsWhileDown).toBeGreaterThan(3);
    expect(received.some(({ request, status }) => request.at >= upAt && status !== 200)).toBe(true);
    for (const [index, callbackId] of callbackIds.entries()) {
      const callback = (await api.get(`/conversations/${id}/callbacks`)).json().items.find((item: { id: string }) => item.id === callbackId);
      expect(callback).toMatchObject({ state: 'active', pending_count: 0, cursor_seq: events.length, delivered_count: expectations[index]!.seqs.length });
      expect(callback.failed_attempt_count).toBeGreaterThan(2);
      const log = (await api.get(`/conversations/${id}/callbacks/${callbackId}/deliveries?limit=1000`)).json().items as { seq: number; state: string }[];
      expect(log.map((item) => item.seq)).toEqual(expectations[index]!.seqs);
      expect(new Set(log.map((item) => item.state))).toEqual(new Set(['delivered']));
    }
    console.log(`webhook outage: ${events.length} events, ${eventsWhileDown} appended in ${upAt - downAt} ms down, ${received.length} requests received`);
  });
});
