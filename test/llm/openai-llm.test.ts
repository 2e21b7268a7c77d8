import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { isAbortError, OpenAiLlmClient, type OpenAiLlmClientOptions } from '../../src/adapters/llm/openai-llm.js';
import { LlmError, type LlmMessage, type LlmRequest, type LlmSettings } from '../../src/core/agent/llm.js';
import { startFakeLlm, type FakeLlm, type FakeLlmOptions, type FakeTurn } from '../fake-llm/fake-llm-server.js';

const API_KEY = 'sk-test-secret-key-1234567890';
const TOOLS = [
  { name: 'bash', description: 'Run a command', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } },
  { name: 'file_editor', description: 'Edit files', parameters: { type: 'object', properties: { path: { type: 'string' } } } },
];
const BASE_MESSAGES: LlmMessage[] = [
  { role: 'system', content: 'You are a coding agent.' },
  { role: 'user', content: 'List the files.' },
];

let fake: FakeLlm | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function start(script: FakeTurn[] | FakeLlmOptions): Promise<FakeLlm> {
  fake = await startFakeLlm(script);
  return fake;
}

function fastClient(options: OpenAiLlmClientOptions = {}): OpenAiLlmClient {
  return new OpenAiLlmClient({ retryBaseDelayMs: 5, retryMaxDelayMs: 20, ...options });
}

function makeRequest(server: FakeLlm, overrides: Omit<Partial<LlmRequest>, 'settings'> & { settings?: Partial<LlmSettings> } = {}): LlmRequest {
  const { settings, ...rest } = overrides;
  return {
    messages: BASE_MESSAGES,
    tools: TOOLS,
    signal: new AbortController().signal,
    ...rest,
    settings: { model: 'fake-model', base_url: server.url, api_key: API_KEY, num_retries: 3, timeout_s: 5, ...settings },
  };
}

async function failure(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.fail('expected the call to fail'),
    (err: unknown) => err,
  );
}

describe('OpenAiLlmClient', () => {
  it('streams text deltas and sends a well-formed streaming request', async () => {
    const server = await start([{ text: 'Hello there, streaming world!' }]);
    const deltas: string[] = [];
    const response = await fastClient().complete(makeRequest(server, { onTextDelta: (d) => deltas.push(d) }));
    expect(deltas.length).toBeGreaterThan(3);
    expect(deltas.join('')).toBe('Hello there, streaming world!');
    expect(response).toMatchObject({ content: 'Hello there, streaming world!', toolCalls: [], finishReason: 'stop' });
    const [sent] = server.requests;
    expect(sent?.body).toMatchObject({ model: 'fake-model', stream: true, stream_options: { include_usage: true } });
    expect(sent?.body.tools?.[0]).toEqual({ type: 'function', function: TOOLS[0] });
    expect(sent?.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(server.violations).toEqual([]);
  });

  it('reassembles several tool calls whose arguments arrive split over many chunks', async () => {
    const server = await start({ argumentsChunkSize: 3, script: [
      { text: 'Let me look.', toolCalls: [
        { name: 'bash', arguments: { command: 'ls -la /tmp && echo "done"' } },
        { name: 'file_editor', arguments: { command: 'view', path: 'src/app.ts' } },
      ] },
      { text: 'Two files.' },
    ] });
    const client = fastClient();
    const first = await client.complete(makeRequest(server));
    expect(first.content).toBe('Let me look.');
    expect(first.finishReason).toBe('tool_calls');
    expect(first.toolCalls.map((c) => [c.name, JSON.parse(c.arguments)])).toEqual([
      ['bash', { command: 'ls -la /tmp && echo "done"' }],
      ['file_editor', { command: 'view', path: 'src/app.ts' }],
    ]);
    expect(new Set(first.toolCalls.map((c) => c.id)).size).toBe(2);
    // The history goes back as assistant tool_calls + one tool message per id: the fake accepts it.
    const history: LlmMessage[] = [
      ...BASE_MESSAGES,
      { role: 'assistant', content: first.content, tool_calls: first.toolCalls },
      ...first.toolCalls.map((c): LlmMessage => ({ role: 'tool', tool_call_id: c.id, content: 'ok' })),
    ];
    const second = await client.complete(makeRequest(server, { messages: history }));
    expect(second.content).toBe('Two files.');
    expect(server.requests[1]?.body.messages?.[2]?.tool_calls?.[1]).toMatchObject({ type: 'function', function: { name: 'file_editor' } });
    expect(server.violations).toEqual([]);
  });

  it('works without streaming (and retries there too)', async () => {
    const server = await start([
      { status: 500 },
      { text: 'Plain.', toolCalls: [{ name: 'bash', arguments: '{"command":"pwd"}' }], usage: { prompt_tokens: 7, completion_tokens: 3 } },
    ]);
    const deltas: string[] = [];
    const response = await fastClient({ stream: false }).complete(makeRequest(server, { onTextDelta: (d) => deltas.push(d) }));
    expect(response.content).toBe('Plain.');
    expect(response.toolCalls).toEqual([{ id: expect.stringMatching(/^call_fake_/), name: 'bash', arguments: '{"command":"pwd"}' }]);
    expect(response.usage).toMatchObject({ prompt_tokens: 7, completion_tokens: 3 });
    expect(deltas).toEqual([]);
    expect(server.requests[0]?.body.stream).not.toBe(true);
    expect(server.requests[0]?.body.stream_options).toBeUndefined();
    expect(server.violations).toEqual([]);
  });

  it('retries a 429, honouring retry-after', async () => {
    const server = await start([{ status: 429, retryAfter: 1 }, { text: 'ok' }]);
    const started = Date.now();
    const response = await fastClient().complete(makeRequest(server));
    expect(response.content).toBe('ok');
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(server.requests).toHaveLength(2);
  });

  it('caps a long retry-after', async () => {
    const server = await start([{ status: 429, retryAfter: 3600 }, { text: 'ok' }]);
    const started = Date.now();
    await fastClient({ maxRetryAfterMs: 100 }).complete(makeRequest(server));
    expect(Date.now() - started).toBeLessThan(1500);
  });

  it('retries 500s, timeouts and broken streams that had not streamed text yet', async () => {
    const server = await start([
      { status: 500 },
      { status: 502 },
      { hang: true },
      { text: 'hello', hangAfterChunks: 1 },
      { text: 'hello', dropAfterChunks: 1 },
      { disconnect: true },
      { text: 'finally' },
    ]);
    const deltas: string[] = [];
    const response = await fastClient().complete(
      makeRequest(server, { settings: { num_retries: 6, timeout_s: 0.3 }, onTextDelta: (d) => deltas.push(d) }),
    );
    expect(response.content).toBe('finally');
    expect(deltas.join('')).toBe('finally');
    expect(server.requests).toHaveLength(7);
  });

  it('fails with LlmError once retries run out', async () => {
    const server = await start([{ status: 503 }, { status: 503 }, { status: 503 }, { text: 'never' }]);
    const err = await failure(fastClient().complete(makeRequest(server, { settings: { num_retries: 2 } })));
    expect(err).toBeInstanceOf(LlmError);
    expect(err).toMatchObject({ code: 'llm_server_error', status: 503 });
    expect((err as Error).message).toMatch(/after 3 attempts: 503/);
    expect(server.requests).toHaveLength(3);
  });

  it('does not retry 400 or 401', async () => {
    const server = await start([{ status: 400 }, { status: 401 }, { text: 'never' }]);
    const client = fastClient();
    expect(await failure(client.complete(makeRequest(server)))).toMatchObject({ code: 'llm_bad_request', status: 400 });
    expect(await failure(client.complete(makeRequest(server)))).toMatchObject({ code: 'llm_auth_error', status: 401 });
    expect(server.requests).toHaveLength(2);
  });

  it('does not retry once text has streamed', async () => {
    const server = await start([{ text: 'Hello world', dropAfterChunks: 3 }, { text: 'never' }]);
    const deltas: string[] = [];
    const err = await failure(fastClient().complete(makeRequest(server, { onTextDelta: (d) => deltas.push(d) })));
    expect(err).toMatchObject({ code: 'llm_connection_error' });
    expect((err as Error).message).toMatch(/not retried/);
    expect(deltas.join('')).toBe('Hello wo'); // role chunk + two 4-character deltas
    expect(server.requests).toHaveLength(1);
  });

  it('reports connection errors after retries', async () => {
    const server = await start([]);
    const url = server.url;
    await server.close();
    fake = undefined;
    const err = await failure(fastClient().complete({ ...makeRequest(server), settings: { model: 'm', base_url: url, num_retries: 1 } }));
    expect(err).toMatchObject({ code: 'llm_connection_error' });
  });

  it('aborts a hanging request promptly', async () => {
    const server = await start([{ hang: true }]);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const started = Date.now();
    const err = await failure(fastClient().complete(makeRequest(server, { signal: controller.signal, settings: { timeout_s: 60 } })));
    expect(isAbortError(err)).toBe(true);
    expect(err).not.toBeInstanceOf(LlmError);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('aborts during the backoff sleep', async () => {
    const server = await start([{ status: 500 }, { text: 'never' }]);
    const controller = new AbortController();
    const pending = new OpenAiLlmClient({ retryBaseDelayMs: 30_000 }).complete(makeRequest(server, { signal: controller.signal }));
    while (server.requests.length === 0) await new Promise((r) => setTimeout(r, 5));
    await new Promise((r) => setTimeout(r, 50));
    const started = Date.now();
    controller.abort();
    const err = await failure(pending);
    expect(isAbortError(err)).toBe(true);
    expect(Date.now() - started).toBeLessThan(200);
    expect(server.requests).toHaveLength(1);
  });

  it('aborts while a stream is in progress', async () => {
    const server = await start([{ text: 'a slow answer that keeps coming', chunkDelayMs: 50 }]);
    const controller = new AbortController();
    const err = await failure(fastClient().complete(makeRequest(server, { signal: controller.signal, onTextDelta: () => controller.abort() })));
    expect(isAbortError(err)).toBe(true);
  });

  it('computes usage and cost; no usage is unknown (zeros flagged as counting nothing)', async () => {
    const server = await start([{ text: 'a', usage: { prompt_tokens: 1000, completion_tokens: 200 } }, { text: 'b', usage: null }]);
    const client = fastClient();
    const settings = { input_cost_per_token: 0.000001, output_cost_per_token: 0.000002 };
    const first = await client.complete(makeRequest(server, { settings }));
    expect(first.usage.prompt_tokens).toBe(1000);
    expect(first.usage.completion_tokens).toBe(200);
    expect(first.usage.cost).toBeCloseTo(0.0014, 10);
    expect((await client.complete(makeRequest(server, { settings }))).usage).toEqual({ prompt_tokens: 0, completion_tokens: 0, cost: 0, cached_tokens: 0, reasoning_tokens: 0, unknown: true });
  });

  it('never puts the api key in an error message', async () => {
    const echo = { error: { message: `Incorrect API key provided: ${API_KEY}`, type: 'invalid_request_error' } };
    const server = await start([{ status: 401, body: echo }]);
    const err = await failure(fastClient().complete(makeRequest(server)));
    expect(err).toMatchObject({ code: 'llm_auth_error' });
    expect((err as Error).message).toContain('Incorrect API key provided: ***');
    expect(JSON.stringify(err) + String((err as Error).stack)).not.toContain(API_KEY);
  });

  it('maps settings: max tokens field, reasoning effort, sampling', async () => {
    const server = await start([]);
    const settings = { max_output_tokens: 256, temperature: 0.2, top_p: 0.9, reasoning_effort: 'none' as const };
    await fastClient().complete(makeRequest(server, { settings }));
    await fastClient({ maxTokensParam: 'max_completion_tokens' }).complete(makeRequest(server, { settings: { ...settings, reasoning_effort: 'high' } }));
    const [first, second] = server.requests.map((r) => r.body);
    expect(first).toMatchObject({ max_tokens: 256, temperature: 0.2, top_p: 0.9 });
    expect(first).not.toHaveProperty('reasoning_effort');
    expect(second).toMatchObject({ max_completion_tokens: 256, reasoning_effort: 'high' });
    expect(second).not.toHaveProperty('max_tokens');
    expect(server.violations).toEqual([]);
  });

  it('talks to Azure with api_version: deployment path, api-version query, api-key header', async () => {
    const server = await start({ apiKey: API_KEY, script: [{ text: 'from azure' }] });
    const response = await fastClient().complete(makeRequest(server, { settings: { base_url: server.origin, api_version: '2024-10-21', model: 'gpt-4o-deploy', max_output_tokens: 100 } }));
    expect(response.content).toBe('from azure');
    const [sent] = server.requests;
    expect(sent).toMatchObject({ path: '/openai/deployments/gpt-4o-deploy/chat/completions', deployment: 'gpt-4o-deploy', query: { 'api-version': '2024-10-21' } });
    expect(sent?.headers['api-key']).toBe(API_KEY);
    expect(sent?.headers.authorization).toBeUndefined();
    expect(sent?.body).toMatchObject({ max_completion_tokens: 100 });
    expect(server.violations).toEqual([]);
  });
});

describe('OpenAiLlmClient behind a redirect', () => {
  it('follows a 307 from the base URL to the real endpoint with the same request (the body is not copied for endpoints that answer directly)', async () => {
    const server = await start([{ text: 'redirected fine' }]);
    const target = new URL(server.url);
    const redirects: string[] = [];
    const front = http.createServer((req, res) => {
      redirects.push(`${req.method} ${req.url}`);
      res.writeHead(307, { location: `${target.origin}${target.pathname.replace(/\/$/, '')}${req.url!.replace(/^\/v1/, '')}` });
      res.end();
    });
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', () => resolve()));
    try {
      const { port } = front.address() as { port: number };
      const response = await fastClient().complete(makeRequest(server, { settings: { base_url: `http://127.0.0.1:${port}/v1` } }));
      expect(response.content).toBe('redirected fine');
      expect(redirects).toEqual(['POST /v1/chat/completions', 'POST /v1/chat/completions']);
      expect(server.requests).toHaveLength(1);
      expect(server.requests[0]?.body.messages).toEqual(BASE_MESSAGES);
    } finally {
      await new Promise((resolve) => front.close(resolve));
    }
  });
});

describe('fake LLM server validation', () => {
  const system = { role: 'system', content: 's' };
  const user = { role: 'user', content: 'u' };
  const assistantCall = { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'bash', arguments: '{}' } }] };
  const cases: Array<[string, Record<string, unknown>, RegExp]> = [
    ['missing model', { messages: [system, user] }, /`model` is missing/],
    ['empty messages', { model: 'm', messages: [] }, /non-empty array/],
    ['first message not system', { model: 'm', messages: [user] }, /first message must be role "system"/],
    ['orphan tool message', { model: 'm', messages: [system, user, { role: 'tool', tool_call_id: 'zz', content: 'x' }] }, /no matching assistant tool_call/],
    ['unanswered tool call', { model: 'm', messages: [system, user, assistantCall, user] }, /\[c1\] with no tool message before messages\[3\]/],
    ['malformed tools', { model: 'm', messages: [system, user], tools: [{ type: 'function', function: { name: 'bad name' } }] }, /tools\[0\]/],
    ['tool without parameters', { model: 'm', messages: [system, user], tools: [{ type: 'function', function: { name: 'x' } }] }, /parameters must be/],
  ];
  it.each(cases)('rejects %s with 400 and records a violation', async (_name, body, expected) => {
    const server = await start([{ text: 'never' }]);
    const res = await fetch(`${server.url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(res.status).toBe(400);
    expect(server.violations.join('\n')).toMatch(expected);
    expect(server.remaining()).toBe(1);
  });

  it('can allow a conversation without a system message, and answers "done" once the script is exhausted', async () => {
    const server = await start({ requireSystemFirst: false });
    const response = await fastClient().complete(makeRequest(server, { messages: [{ role: 'user', content: 'hi' }] }));
    expect(response.content).toBe('done');
    expect(server.violations).toEqual([]);
  });

  it('passes dynamic turns the recorded request', async () => {
    const server = await start([(req) => ({ text: `you said ${String(req.body.messages?.at(-1)?.content)}` })]);
    expect((await fastClient().complete(makeRequest(server))).content).toBe('you said List the files.');
  });
});
