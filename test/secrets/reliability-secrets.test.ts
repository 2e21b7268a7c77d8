/**
 * R6 secret leaks: a random secret, used by the agent (bash printing it, writing it to a file,
 * file_editor viewing it, grep finding it, the LLM's own text and tool arguments repeating it,
 * a provider error quoting it, an action waiting for confirmation carrying it) and by commands,
 * appears nowhere it could leave the server: API responses (every GET route of the conversation),
 * events over REST and SSE (with the streamed deltas), debug logs, webhook bodies, the requests
 * the LLM receives, and every file of the data dir outside the workdir.
 */
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OpenAiLlmClient } from '../../src/adapters/llm/openai-llm.js';
import { SecretMasker } from '../../src/core/secrets/secret-masker.js';
import { StreamingMasker } from '../../src/core/secrets/streaming-masker.js';
import { startFakeLlm, type FakeLlm, type FakeTurn } from '../fake-llm/fake-llm-server.js';
import { startServer, type TestServer } from '../support/agentd.js';
import { allEvents, apiClient, until, type Api } from '../support/reliability.js';
import { connectSse, type SseConnection } from '../support/sse-client.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

const SECRET = `Sx-${randomBytes(16).toString('hex')}`;
const LATER_SECRET = `Lx-${randomBytes(16).toString('hex')}`;
const MASK = '<secret:API_TOKEN>';

const bash = (command: string, text?: string): FakeTurn => ({ ...(text ? { text } : {}), toolCalls: [{ name: 'bash', arguments: { command } }] });
const editor = (args: Record<string, unknown>): FakeTurn => ({ toolCalls: [{ name: 'file_editor', arguments: args }] });

let llm: FakeLlm;
let server: TestServer;
let api: Api;
let receiver: WebhookReceiver;
let conversationId: string;
let workdir: string;
const logLines: string[] = [];
const streams: SseConnection[] = [];

beforeAll(async () => {
  llm = await startFakeLlm([]);
  receiver = await WebhookReceiver.start();
  const logStream = new PassThrough();
  logStream.on('data', (chunk: Buffer) => logLines.push(...chunk.toString('utf8').split('\n').filter(Boolean)));
  server = await startServer({
    logStream,
    env: { AGENTD_WEBHOOK_RETRY_BASE_MS: '20', AGENTD_WEBHOOK_RETRY_MAX_MS: '100' },
    overrides: { llm: new OpenAiLlmClient({ retryBaseDelayMs: 20, retryMaxDelayMs: 100 }) },
  });
  api = apiClient(server.url);
});
afterAll(async () => {
  for (const stream of streams) stream.close();
  await server?.close();
  await llm?.close();
  await receiver?.close();
});

async function waitForRest(statuses: string[]): Promise<any> {
  let conversation: any;
  await until(async () => {
    conversation = (await api.get(`/conversations/${conversationId}`)).json();
    return statuses.includes(conversation.status);
  }, `status ${statuses.join('|')}`);
  return conversation;
}

/** Runs one message through the agent with these LLM turns and waits for the run to end. */
async function converse(content: string, turns: FakeTurn[], statuses = ['idle']): Promise<any> {
  llm.setScript(turns);
  const sent = await api.post(`/conversations/${conversationId}/messages`, { content });
  expect(sent.status, sent.text).toBe(202);
  await until(async () => llm.remaining() === 0, 'the LLM turns to be used');
  return waitForRest(statuses);
}

describe('a secret used by the agent and by commands', () => {
  it('is used for real (positive controls) and leaks nowhere', async () => {
    const leaks: string[] = [];
    const check = (where: string, text: string) => {
      for (const value of [SECRET, LATER_SECRET]) if (text.includes(value)) leaks.push(`${where}: ${excerpt(text, value)}`);
    };
    const checkDataDir = (where: string) => {
      const outsideWorkdir = filesUnder(server.dataDir).filter((file) => !file.startsWith(`${workdir}${path.sep}`));
      expect(outsideWorkdir.length).toBeGreaterThan(5);
      for (const file of outsideWorkdir) check(`${where}: ${path.relative(server.dataDir, file)}`, fs.readFileSync(file, 'latin1'));
    };
    const created = await api.post('/conversations', { llm: { model: 'fake', base_url: llm.url, api_key: 'sk-fake', num_retries: 0 }, secrets: { API_TOKEN: SECRET } });
    expect(created.status, created.text).toBe(201);
    ({ id: conversationId, workdir } = created.json());
    const callback = await api.post(`/conversations/${conversationId}/callbacks`, { url: receiver.url, secret: 'hook-signing-key' });
    expect(callback.status, callback.text).toBe(201);
    streams.push(await connectSse(`${server.url}/conversations/${conversationId}/events/stream`, server.auth));
    streams.push(await connectSse(`${server.url}/events/stream`, server.auth));

    // The agent: bash prints it and writes it to a file, file_editor views it, grep finds it,
    // the LLM repeats it in its text, its thought and its tool arguments.
    await converse(`Deploy with the token ${SECRET}, please.`, [
      bash('echo "token: $API_TOKEN"; echo "$API_TOKEN" > secret.txt', 'Let me look at the token.'),
      editor({ command: 'view', path: 'secret.txt' }),
      { toolCalls: [{ name: 'grep', arguments: { pattern: 'Sx-[0-9a-f]+' } }] },
      editor({ command: 'create', path: 'copy.txt', file_text: `copied ${SECRET}\n` }),
      bash(`echo literal ${SECRET} | tr a-z A-Z | tr A-Z a-z`, `I will print ${SECRET} myself.`),
      { text: `The token is ${SECRET}; all done.` },
    ]);

    // A secret added mid-conversation reaches the live shell, masked as well.
    const put = await api.request('PUT', `/conversations/${conversationId}/secrets`, { secrets: { LATER_TOKEN: LATER_SECRET } });
    expect(put.status, put.text).toBe(200);
    await converse('Use the later one.', [bash('echo "later: $LATER_TOKEN"'), { text: 'ok' }]);

    // An action waiting for confirmation carries it in its arguments; the rejection reason too.
    expect((await api.post(`/conversations/${conversationId}/confirmation`, { enabled: true })).status).toBe(200);
    const waiting = await converse('Once more, with confirmation.', [bash(`curl -H "Authorization: ${SECRET}" http://127.0.0.1:9/`)], ['waiting_for_confirmation']);
    expect(waiting.pending_actions).toHaveLength(1);
    check('GET conversation while an action waits', JSON.stringify(waiting));
    checkDataDir('data dir while an action waits');
    llm.setScript([{ text: 'Understood.' }]);
    expect((await api.post(`/conversations/${conversationId}/reject`, { reason: `never send ${SECRET}` })).status).toBe(202);
    await waitForRest(['idle']);
    expect((await api.post(`/conversations/${conversationId}/confirmation`, { enabled: false })).status).toBe(200);

    // A provider error quoting it ends the run in error.
    await converse('And fail.', [{ status: 400, body: { error: { message: `Invalid request near '${SECRET}'`, type: 'invalid_request_error' } } }], ['error']);

    // Commands: the environment, a literal in the command, stdout and stderr.
    const command = await api.post(`/conversations/${conversationId}/commands`, { command: `echo "$API_TOKEN"; printenv API_TOKEN >&2; echo ${SECRET}` });
    expect(command.status, command.text).toBe(200);
    expect(command.json().stdout).toBe(`${MASK}\n${MASK}\n`);
    expect(command.json().stderr).toBe(`${MASK}\n`);
    // A client putting it in a URL (logged at debug when the request is rejected).
    expect((await api.get(`/conversations/${conversationId}/events?page_id=${SECRET}`)).status).toBe(400);

    // Positive controls: the secret really was used, and the detector sees it where it is on purpose.
    const { events, texts } = await allEvents(api, conversationId);
    const observations = events.filter((event) => event.kind === 'observation').map((event) => String(event.content));
    expect(observations[0]).toContain(`token: ${MASK}`);
    expect(observations.some((content) => content.includes(`1\t${MASK}`))).toBe(true);
    expect(observations.some((content) => content.includes(`secret.txt:1: ${MASK}`))).toBe(true);
    expect(observations.some((content) => content.includes('later: <secret:LATER_TOKEN>'))).toBe(true);
    expect(fs.readFileSync(path.join(workdir, 'secret.txt'), 'utf8')).toBe(`${SECRET}\n`);
    expect(fs.readFileSync(path.join(workdir, 'copy.txt'), 'utf8')).toContain(SECRET);
    expect(llm.violations).toEqual([]);

    // Events: REST, SSE (conversation stream and firehose, deltas included), webhook bodies.
    texts.forEach((text, index) => check(`event #${index + 1}`, text));
    const lastSeq = events.length;
    const [conversationStream, firehose] = streams as [SseConnection, SseConnection];
    await conversationStream.waitFor((messages) => messages.some((message) => Number(message.id) === lastSeq));
    await firehose.waitFor((messages) => messages.filter((message) => message.id !== undefined).length >= lastSeq);
    expect(conversationStream.messages.some((message) => message.event === 'message_delta')).toBe(true);
    for (const [name, stream] of [['SSE', conversationStream], ['firehose SSE', firehose]] as const) {
      for (const message of stream.messages) check(`${name} ${message.event} ${message.id ?? ''}`, message.data);
      const streamed = stream.messages.filter((message) => message.event === 'message_delta').map((message) => JSON.parse(message.data).content_delta).join('');
      check(`${name} deltas joined`, streamed);
      expect(streamed).toContain(`The token is ${MASK}; all done.`);
    }
    await receiver.waitFor(() => receiver.delivered.length >= lastSeq, 'every event to be delivered', 15_000);
    for (const request of receiver.requests) check(`webhook ${request.json.event.seq}`, `${JSON.stringify(request.headers)}${request.body}`);

    // Every GET route of the OpenAPI document, for this conversation and everything in it.
    const responses = await everyGetResponse(events.map((event) => event.id));
    expect(responses.length).toBeGreaterThan(events.length + 10);
    for (const { url, text } of responses) {
      if (/\/files\/(secret|copy)\.txt$/.test(url)) expect(text, `${url} is the file the agent wrote`).toContain(SECRET);
      else check(`GET ${url}`, text);
    }

    // What the LLM received, the logs, and every file of the data dir outside the workdir.
    for (const request of llm.requests) check(`LLM request #${request.index}`, `${JSON.stringify(request.headers)}${JSON.stringify(request.body)}`);
    expect(logLines.some((line) => line.includes('"level":20'))).toBe(true);
    logLines.forEach((line, index) => check(`log line ${index}`, line));
    checkDataDir('data dir');

    expect(leaks).toEqual([]);
  });
});

describe('streamed text', () => {
  it('is masked whole wherever the pieces split a secret, and nothing is lost', () => {
    const masker = new SecretMasker({ LONG: 'abcdefgh', SHORT: 'cdef', OTHER: 'xyz1' });
    const text = 'zz abcdefgh cdef abcdefxyz1 abc';
    const expected = 'zz <secret:LONG> <secret:SHORT> ab<secret:SHORT><secret:OTHER> abc';
    expect(masker.maskText(text)).toBe(expected);
    for (let size = 1; size <= text.length; size++) {
      for (let offset = 0; offset < size; offset++) {
        const stream = new StreamingMasker(masker);
        const pieces = [text.slice(0, offset), ...Array.from({ length: Math.ceil((text.length - offset) / size) }, (_, i) => text.slice(offset + i * size, offset + (i + 1) * size))];
        const out = pieces.map((piece) => stream.push(piece));
        expect(out.join('') + stream.flush(), `pieces of ${size} from ${offset}`).toBe(expected);
        expect(out.some((piece) => /abcdefgh|cdef|xyz1/.test(piece))).toBe(false);
      }
    }
  });
});

/** GET every route of the OpenAPI document with its parameters filled in from this conversation. */
async function everyGetResponse(eventIds: string[]): Promise<Array<{ url: string; text: string }>> {
  const document = (await api.get('/openapi.json')).json() as { paths: Record<string, Record<string, { parameters?: { in: string; name: string }[] }>> };
  const runs = (await api.get(`/conversations/${conversationId}/runs?limit=1000`)).json().items.map((run: { id: string }) => run.id);
  const callbacks = (await api.get(`/conversations/${conversationId}/callbacks`)).json().items.map((callback: { id: string }) => callback.id);
  const files = (await api.get(`/conversations/${conversationId}/files?recursive=true&limit=1000`)).json().items.filter((entry: { type: string }) => entry.type === 'file').map((entry: { path: string }) => entry.path);
  const values: Record<string, string[]> = { id: [conversationId], event_id: eventIds, run_id: runs, callback_id: callbacks, path: files };
  const out: Array<{ url: string; text: string }> = [];
  for (const [route, operations] of Object.entries(document.paths)) {
    const operation = operations.get;
    // The master key this test calls with has no key record: /keys/me answers 404 for it by design.
    if (!operation || route.endsWith('/stream') || route === '/keys/me') continue;
    // Keys and schedules: none exists in this test (its conversation's id fills {id} elsewhere).
    if (route.includes('{id}') && !route.startsWith('/conversations/')) continue;
    const query = (operation.parameters ?? []).filter((parameter) => parameter.in === 'query').map((parameter) => parameter.name);
    const search = [query.includes('limit') ? 'limit=1000' : '', query.includes('pattern') ? 'pattern=**' : '', query.includes('recursive') ? 'recursive=true' : '', query.includes('cron') ? 'cron=%40hourly' : ''].filter(Boolean).join('&');
    let urls = [route];
    for (const name of route.match(/\{([^}]+)\}/g)?.map((token) => token.slice(1, -1)) ?? []) {
      urls = urls.flatMap((url) => (values[name] ?? []).map((value) => url.replace(`{${name}}`, value)));
    }
    for (const url of urls) {
      const full = search ? `${url}?${search}` : url;
      const response = await api.get(full);
      expect(response.status, `GET ${full}: ${response.text.slice(0, 200)}`).toBeLessThan(300);
      out.push({ url: full, text: response.text });
    }
  }
  return out;
}

function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true, recursive: true }).filter((entry) => entry.isFile()).map((entry) => path.join(entry.parentPath, entry.name));
}

function excerpt(text: string, value: string): string {
  const at = text.indexOf(value);
  return text.slice(Math.max(0, at - 60), at + value.length + 20);
}
