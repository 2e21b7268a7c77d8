import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_AGENT_PATH } from '../../src/config-variables.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { startServer, type TestServer } from '../support/agentd.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';
import { expectError } from '../support/expect-error.js';
import { fetchWithKey } from '../support/json-api.js';

/** What a new user runs into first: empty bodies, 415s, webhook history, the agent's PATH, LLM failures in the log. */
let server: TestServer | undefined;
let harness: AgentHarness | undefined;
const receivers: WebhookReceiver[] = [];
afterEach(async () => {
  await harness?.close();
  await server?.close();
  for (const receiver of receivers.splice(0)) await receiver.close();
  harness = undefined;
  server = undefined;
});

async function call(method: string, route: string, init: { body?: string; type?: string } = {}): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = init.type === undefined ? {} : { 'content-type': init.type };
  const response = await fetchWithKey(server!, route, { method, headers, ...(init.body !== undefined ? { body: init.body } : {}) });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}
const JSON_TYPE = 'application/json';

describe('an empty JSON body where the body is optional', () => {
  it('is accepted by every body-less action and by create; a required body names what is missing', async () => {
    server = await startServer();
    const created = await call('POST', '/conversations', { type: JSON_TYPE, body: '' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;

    expect((await call('POST', `/conversations/${id}/pause`, { type: JSON_TYPE, body: '' })).status).toBe(200);
    // No LLM is configured: the run is refused for that reason (422), not for the empty body.
    const run = await call('POST', `/conversations/${id}/run`, { type: JSON_TYPE, body: '' });
    expect(run.body.error).not.toMatch(/json|validation/);
    expect([202, 422]).toContain(run.status);
    // Nothing pending: 409 from the state, not 400 from the body.
    expectError(await call('POST', `/conversations/${id}/approve`, { type: JSON_TYPE, body: '' }), { status: 409, error: 'no_pending_actions', message: /^No actions are waiting for confirmation\./ });
    expectError(await call('POST', `/conversations/${id}/reject`, { type: JSON_TYPE, body: '' }), { status: 409, error: 'no_pending_actions', message: /^No actions are waiting for confirmation\./ });
    expect((await call('POST', `/conversations/${id}/dirs/a/b`, { type: JSON_TYPE, body: '' })).status).toBeLessThan(300);

    const receiver = await WebhookReceiver.start();
    receivers.push(receiver);
    const callback = await call('POST', `/conversations/${id}/callbacks`, { type: JSON_TYPE, body: JSON.stringify({ url: receiver.url }) });
    expect(callback.status).toBe(201);
    expect((await call('POST', `/conversations/${id}/callbacks/${callback.body.id}/enable`, { type: JSON_TYPE, body: '' })).status).toBeLessThan(300);
    // DELETEs from a client that sends Content-Type: application/json on every request.
    expect((await call('DELETE', `/conversations/${id}/callbacks/${callback.body.id}`, { type: JSON_TYPE, body: '' })).status).toBe(204);
    expect((await call('PUT', `/conversations/${id}/secrets`, { type: JSON_TYPE, body: JSON.stringify({ secrets: { TOKEN: 'a-value' } }) })).status).toBeLessThan(300);
    expect((await call('DELETE', `/conversations/${id}/secrets/TOKEN`, { type: JSON_TYPE, body: '' })).status).toBe(204);

    const missing = await call('POST', `/conversations/${id}/messages`, { type: JSON_TYPE, body: '' });
    expect(missing.status).toBe(400);
    expect(missing.body).toMatchObject({ error: 'validation_error' });
    expect(missing.body.message).toMatch(/body/i);
    expectError(await call('POST', `/conversations/${id}/confirmation`, { type: JSON_TYPE, body: '  ' }), { status: 400, error: 'validation_error', message: /^Invalid body: Invalid input: expected object, re/ });
  });
});

describe('reject with an empty body', () => {
  it('rejects the pending action without a reason; the LLM reads a full sentence', async () => {
    harness = await startAgentHarness([
      { toolCalls: [{ name: 'bash', arguments: { command: 'echo one' } }] },
      { toolCalls: [{ name: 'bash', arguments: { command: 'echo two' } }] },
      { text: 'ok' },
    ]);
    const id = await harness.createConversation({ confirmation_mode: true, initial_message: 'go' });
    await harness.waitForStatus(id, ['waiting_for_confirmation']);
    const headers = { ...harness.server.auth, 'content-type': JSON_TYPE };
    const post = (route: string) => fetch(`${harness!.server.url}/conversations/${id}/${route}`, { method: 'POST', headers, body: '' });
    expect((await post('reject')).status).toBe(202);
    await harness.waitForStatus(id, ['waiting_for_confirmation']);
    expect((await post('approve')).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    const toolMessages = (harness.llm.requests.at(-1)!.body as any).messages.filter((message: any) => message.role === 'tool');
    expect(toolMessages[0].content).toBe('The user rejected this action. It was not executed.');
    expect(toolMessages[1].content).toContain('two');
  });
});

describe('415 Unsupported Media Type', () => {
  it('says what to send instead', async () => {
    server = await startServer();
    const response = await call('POST', '/conversations', { type: 'text/plain', body: '{}' });
    expect(response.status).toBe(415);
    expect(response.body.error).toBe('unsupported_media_type');
    expect(response.body.message).toContain('text/plain');
    expect(response.body.message).toContain('Content-Type: application/json');
    const id = (await call('POST', '/conversations', { type: JSON_TYPE, body: '{}' })).body.id as string;
    const upload = await call('POST', `/conversations/${id}/files/upload`, { type: JSON_TYPE, body: '{}' });
    expect(upload.status).toBe(415);
    expect(upload.body.message).toContain('multipart/form-data');
  });
});

describe('a new webhook', () => {
  it('gets the whole history with from "start" (the default), only new events with from "now"', async () => {
    server = await startServer();
    const id = (await call('POST', '/conversations', { type: JSON_TYPE, body: '{}' })).body.id as string;
    for (const content of ['one', 'two', 'three']) await call('POST', `/conversations/${id}/messages`, { type: JSON_TYPE, body: JSON.stringify({ content, run: false }) });
    const [history, fromStart, fromNow] = [await WebhookReceiver.start(), await WebhookReceiver.start(), await WebhookReceiver.start()];
    receivers.push(history, fromStart, fromNow);
    const make = (body: object) => call('POST', `/conversations/${id}/callbacks`, { type: JSON_TYPE, body: JSON.stringify(body) });
    expect((await make({ url: history.url })).status).toBe(201);
    expect((await make({ url: fromStart.url, from: 'start' })).status).toBe(201);
    expect((await make({ url: fromNow.url, from: 'now' })).status).toBe(201);
    expect((await make({ url: fromNow.url, from: 'now', after_seq: 1 })).status).toBe(400);
    expect((await make({ url: fromNow.url, from: 'yesterday' })).status).toBe(400);

    await call('POST', `/conversations/${id}/messages`, { type: JSON_TYPE, body: JSON.stringify({ content: 'four', run: false }) });
    await history.waitFor(() => history.delivered.length === 4 && fromStart.delivered.length === 4 && fromNow.delivered.length === 1, 'the deliveries');
    expect(history.seqs).toEqual([1, 2, 3, 4]);
    expect(fromStart.seqs).toEqual([1, 2, 3, 4]);
    expect(fromNow.seqs).toEqual([4]);
    expect(fromNow.delivered[0]!.json.event).toMatchObject({ kind: 'message', content: 'four' });
  });
});

describe("the agent's PATH", () => {
  it('is AGENTD_AGENT_PATH (default a fixed system PATH), never the server\'s, in the agent\'s bash and in commands', async () => {
    harness = await startAgentHarness([{ toolCalls: [{ name: 'bash', arguments: { command: 'echo "PATH=$PATH"' } }] }, { text: 'done' }]);
    expect(process.env.PATH).not.toBe(DEFAULT_AGENT_PATH);
    const id = await harness.createConversation({ initial_message: 'go' });
    await harness.waitForStatus(id, ['idle', 'error']);
    const observation = (await harness.events(id)).find((event) => event.kind === 'observation');
    expect(observation.content.split('\n')).toContain(`PATH=${DEFAULT_AGENT_PATH}`);
    const command = await harness.post(`/conversations/${id}/commands`, { command: 'echo "$PATH"' });
    expect(command.body.stdout).toBe(`${DEFAULT_AGENT_PATH}\n`);
    await harness.close();

    harness = await startAgentHarness([], { env: { AGENTD_AGENT_PATH: '/opt/agent-tools/bin:/usr/bin:/bin' } });
    const other = await harness.createConversation();
    expect((await harness.post(`/conversations/${other}/commands`, { command: 'echo "$PATH"' })).body.stdout).toBe('/opt/agent-tools/bin:/usr/bin:/bin\n');
  });
});

describe('LLM failures in the server log', () => {
  it('each failed attempt at warn, the final failure at error, with conversation and run ids and never the key', async () => {
    const logStream = new PassThrough();
    let logText = '';
    logStream.on('data', (chunk) => (logText += chunk));
    harness = await startAgentHarness([{ status: 503 }, { status: 503 }, { status: 503 }], { logStream });
    const id = await harness.createConversation({ llm: { model: 'fake-model', base_url: harness.llm.url, api_key: 'sk-test-llm-key', num_retries: 2 }, initial_message: 'go' });
    await harness.waitForStatus(id, ['error']);
    const runId = (await harness.events(id)).find((event) => event.kind === 'agent_error').run_id as string;
    const lines = logText.split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);
    const retries = lines.filter((line) => line.level === 40 && String(line.msg).startsWith('LLM attempt'));
    expect(retries.map((line) => line.attempt)).toEqual([1, 2]);
    for (const line of retries) expect(line).toMatchObject({ conversation_id: id, run_id: runId, code: 'llm_server_error', status: 503 });
    const final = lines.filter((line) => line.level === 50 && String(line.msg).includes('agent_error'));
    expect(final).toHaveLength(1);
    expect(final[0]).toMatchObject({ conversation_id: id, run_id: runId, code: 'llm_server_error' });
    expect(final[0]!.msg).toContain('after 3 attempts');
    expect(logText).not.toContain('sk-test-llm-key');
  });
});
