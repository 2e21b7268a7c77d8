/**
 * Issue 72, part B: the Responses and Anthropic Messages protocols behind the LLM port, against
 * fakes that speak them and refuse what the real APIs refuse. A run through the real server is
 * in protocol-runs.test.ts; here the client itself, over real HTTP to the fake.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FallbackLlmClient, ProtocolLlmClient, llmApiOf } from '../../src/adapters/llm/index.js';
import { LlmError, type LlmMessage, type LlmRequest, type LlmResponse, type LlmRetry, type LlmSettings } from '../../src/core/agent/llm.js';
import { HistoryEntry } from '../../src/core/agent/history-entry.js';
import { startFakeLlm, type FakeLlm, type FakeTurn } from '../fake-llm/fake-llm-server.js';
import type { FakeProtocolTurn } from '../fake-llm/fake-protocol.js';
import { PROTOCOL_ERRORS } from '../fake-llm/protocol-errors.js';

let fake: FakeLlm | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

const client = new ProtocolLlmClient({ retryBaseDelayMs: 5, retryMaxDelayMs: 20, rateLimitWaitMs: 1000 });
const TOOLS = [
  { name: 'bash', description: 'Run a command', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] } },
  { name: 'read', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } },
];

function settingsFor(api: 'responses' | 'anthropic', server: FakeLlm, extra: Partial<LlmSettings> = {}): LlmSettings {
  return api === 'responses'
    ? { model: 'gpt-5', base_url: server.url, api_key: 'sk-responses', api: 'responses', reasoning: { effort: 'medium' }, ...extra }
    : { model: 'claude-sonnet-4-5', base_url: server.origin, api_key: 'sk-ant-key', api: 'anthropic', reasoning: { effort: 'low' }, max_output_tokens: 4096, ...extra };
}

function request(settings: LlmSettings, messages: LlmMessage[], hooks: Partial<LlmRequest> = {}): LlmRequest {
  return { settings, messages, tools: TOOLS, signal: new AbortController().signal, ...hooks };
}

/** The assistant message the history would keep for a response. */
function assistantOf(response: LlmResponse): LlmMessage {
  return { role: 'assistant', content: response.content, ...(response.toolCalls.length > 0 ? { tool_calls: response.toolCalls } : {}), ...(response.reasoning ? { reasoning: response.reasoning } : {}) };
}

const THREE_TURNS: FakeProtocolTurn[] = [
  { reasoning: 'First I list the files and read the README at once.', toolCalls: [{ name: 'bash', arguments: { command: 'ls' } }, { name: 'read', arguments: { path: 'README.md' } }] },
  { reasoning: 'The README names a test command: run it.', text: 'Running the tests.', toolCalls: [{ name: 'bash', arguments: { command: 'npm test' } }] },
  { reasoning: 'All green, so I can answer.', text: 'The tests pass.' },
];

/** Three requests of one tool loop; each sends back what the history keeps of the answers before. */
async function threeTurns(api: 'responses' | 'anthropic') {
  fake = await startFakeLlm({ protocol: api, script: THREE_TURNS, apiKey: api === 'responses' ? 'sk-responses' : 'sk-ant-key' });
  const settings = settingsFor(api, fake);
  const messages: LlmMessage[] = [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'Run the tests.' }];
  const responses: LlmResponse[] = [];
  const reasoningDeltas: string[] = [];
  const textDeltas: string[] = [];
  for (let turn = 0; turn < 3; turn++) {
    const response = await client.complete(request(settings, messages, { onReasoningDelta: (delta) => reasoningDeltas.push(delta), onTextDelta: (delta) => textDeltas.push(delta) }));
    responses.push(response);
    // Through the history's codec, as a conversation keeps it.
    messages.push(new HistoryEntry(client.codec, assistantOf(response), 1, 1).message);
    for (const [index, call] of response.toolCalls.entries()) messages.push({ role: 'tool', tool_call_id: call.id, content: `output ${turn}.${index}` });
  }
  return { responses, reasoningDeltas, textDeltas, server: fake };
}

describe('which protocol a request speaks', () => {
  it('is llm.api when set; Anthropic for its own host; chat otherwise', () => {
    expect(llmApiOf({ model: 'claude-opus-4-1', base_url: 'https://api.anthropic.com' })).toBe('anthropic');
    expect(llmApiOf({ model: 'claude-opus-4-1', base_url: 'https://api.anthropic.com/v1' })).toBe('anthropic');
    expect(llmApiOf({ model: 'anthropic/claude-sonnet-4.5', base_url: 'https://openrouter.ai/api/v1' })).toBe('chat');
    expect(llmApiOf({ model: 'gpt-5' })).toBe('chat');
    expect(llmApiOf({ model: 'gpt-5', api: 'responses' })).toBe('responses');
    expect(llmApiOf({ model: 'claude-sonnet-4-5', base_url: 'https://api.anthropic.com', api: 'chat' })).toBe('chat');
  });
});

describe('OpenAI Responses API', () => {
  it('runs a tool loop with parallel calls and carries its reasoning items back verbatim across three turns', async () => {
    const { responses, reasoningDeltas, textDeltas, server } = await threeTurns('responses');
    expect(server.violations).toEqual([]);
    expect(responses[0]!.toolCalls.map((call) => [call.name, JSON.parse(call.arguments)])).toEqual([['bash', { command: 'ls' }], ['read', { path: 'README.md' }]]);
    expect(responses[0]!.finishReason).toBe('tool_calls');
    expect(responses[2]).toMatchObject({ content: 'The tests pass.', finishReason: 'stop' });
    expect(responses.map((response) => response.reasoning?.text)).toEqual(THREE_TURNS.map((turn) => turn.reasoning));
    expect(reasoningDeltas.join('')).toBe(THREE_TURNS.map((turn) => turn.reasoning).join(''));
    expect(textDeltas.join('')).toBe('Running the tests.The tests pass.');
    const third = server.requests[2]!.body as any;
    expect(third).toMatchObject({ store: false, include: ['reasoning.encrypted_content'], instructions: 'You are a coding agent.', parallel_tool_calls: true, reasoning: { effort: 'medium', summary: 'auto' } });
    // Both earlier reasoning items, each right before what it led to, exactly as issued.
    const kinds = third.input.map((item: any) => item.type ?? item.role);
    expect(kinds).toEqual(['user', 'reasoning', 'function_call', 'function_call', 'function_call_output', 'function_call_output', 'reasoning', 'assistant', 'function_call', 'function_call_output']);
    const sentBack = third.input.filter((item: any) => item.type === 'reasoning');
    expect(sentBack).toEqual([responses[0]!.reasoning!.providerData, responses[1]!.reasoning!.providerData].flat());
    expect(server.requests[2]!.headers.authorization).toBe('Bearer sk-responses');
    expect(responses[0]!.usage).toMatchObject({ reasoning_tokens: expect.any(Number) });
    expect(responses[0]!.usage.reasoning_tokens).toBeGreaterThan(0);
    expect(responses[0]!.usage.prompt_tokens).toBeGreaterThan(0);
  });

  it('the fake refuses an altered reasoning item and an output without its call, as the API does', async () => {
    fake = await startFakeLlm({ protocol: 'responses', script: [THREE_TURNS[0]!] });
    const settings = settingsFor('responses', fake, { num_retries: 0 });
    const first = await client.complete(request(settings, [{ role: 'user', content: 'go' }]));
    const altered = { ...first.reasoning!, providerData: (first.reasoning!.providerData as any[]).map((item) => ({ ...item, encrypted_content: `${item.encrypted_content}x` })) };
    const tail: LlmMessage[] = first.toolCalls.map((call) => ({ role: 'tool', tool_call_id: call.id, content: 'ok' }));
    const refused = await client.complete(request(settings, [{ role: 'user', content: 'go' }, { ...(assistantOf(first) as any), reasoning: altered }, ...tail])).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(LlmError);
    expect((refused as LlmError).code).toBe('llm_bad_request');
    expect((refused as LlmError).message).toContain('could not be verified');
    const orphan = await client.complete(request(settings, [{ role: 'user', content: 'go' }, { role: 'tool', tool_call_id: 'call_nowhere', content: 'x' }])).catch((error: unknown) => error);
    expect((orphan as LlmError).message).toContain('No tool call found for function call output with call_id call_nowhere');
  });

  it('reasoning of another model is not sent back; send_back never sends none', async () => {
    const { responses } = await threeTurns('responses');
    await fake!.close();
    fake = await startFakeLlm({ protocol: 'responses', script: [{ text: 'ok' }, { text: 'ok' }] });
    const history: LlmMessage[] = [{ role: 'user', content: 'go' }, assistantOf(responses[0]!), ...responses[0]!.toolCalls.map((call): LlmMessage => ({ role: 'tool', tool_call_id: call.id, content: 'ok' }))];
    await client.complete(request(settingsFor('responses', fake, { model: 'gpt-5-mini' }), history));
    await client.complete(request(settingsFor('responses', fake, { reasoning: { send_back: 'never' } }), history));
    for (const sent of fake.requests) expect((sent.body as any).input.some((item: any) => item.type === 'reasoning')).toBe(false);
    expect(fake.violations).toEqual([]);
  });

  it("goes to Azure's Responses endpoint: the v1 path, or the preview path with api-version, with api-key", async () => {
    fake = await startFakeLlm({ protocol: 'responses', script: [{ text: 'v1' }, { text: 'preview' }] });
    await client.complete(request({ model: 'my-gpt5-deployment', api: 'responses', base_url: `${fake.origin}/openai/v1`, api_key: 'azure-key' }, [{ role: 'user', content: 'hi' }]));
    await client.complete(request({ model: 'my-gpt5-deployment', api: 'responses', base_url: fake.origin, api_version: '2025-04-01-preview', api_key: 'azure-key' }, [{ role: 'user', content: 'hi' }]));
    expect(fake.requests.map((sent) => [sent.path, sent.query['api-version'], sent.headers['api-key'], sent.headers.authorization])).toEqual([
      ['/openai/v1/responses', undefined, undefined, 'Bearer azure-key'],
      ['/openai/responses', '2025-04-01-preview', 'azure-key', undefined],
    ]);
    expect(fake.violations).toEqual([]);
  });

  it('classifies errors: a 429 and a 500 are retried, a context overflow is llm_context_exceeded at once', async () => {
    fake = await startFakeLlm({ protocol: 'responses', script: [PROTOCOL_ERRORS.responses.rateLimited, PROTOCOL_ERRORS.responses.serverError, { text: 'third time' }, PROTOCOL_ERRORS.responses.contextOverflow, { text: 'never' }] });
    const retries: LlmRetry[] = [];
    const answered = await client.complete(request(settingsFor('responses', fake), [{ role: 'user', content: 'hi' }], { onRetry: (retry) => retries.push(retry) }));
    expect(answered.content).toBe('third time');
    expect(retries.map((retry) => [retry.code, retry.status])).toEqual([['llm_rate_limited', 429], ['llm_server_error', 500]]);
    const overflow = (await client.complete(request(settingsFor('responses', fake), [{ role: 'user', content: 'hi' }])).catch((error: unknown) => error)) as LlmError;
    expect(overflow.code).toBe('llm_context_exceeded');
    expect(fake.requests).toHaveLength(4);
  });
});

describe('Anthropic Messages API', () => {
  it('runs a tool loop with parallel calls and passes its signed thinking back verbatim across three turns', async () => {
    const { responses, reasoningDeltas, server } = await threeTurns('anthropic');
    expect(server.violations).toEqual([]);
    expect(responses[0]!.toolCalls.map((call) => [call.name, JSON.parse(call.arguments)])).toEqual([['bash', { command: 'ls' }], ['read', { path: 'README.md' }]]);
    expect(responses.map((response) => response.finishReason)).toEqual(['tool_calls', 'tool_calls', 'stop']);
    expect(responses.map((response) => response.reasoning?.text)).toEqual(THREE_TURNS.map((turn) => turn.reasoning));
    expect(reasoningDeltas.join('')).toBe(THREE_TURNS.map((turn) => turn.reasoning).join(''));
    const third = server.requests[2]!;
    expect(third.headers['anthropic-version']).toBe('2023-06-01');
    expect(third.headers['x-api-key']).toBe('sk-ant-key');
    const body = third.body as any;
    expect(body).toMatchObject({ model: 'claude-sonnet-4-5', max_tokens: 4096, thinking: { type: 'enabled', budget_tokens: 2048 }, system: [{ type: 'text', text: 'You are a coding agent.', cache_control: { type: 'ephemeral' } }] });
    expect(body.messages.map((message: any) => [message.role, message.content.map((block: any) => block.type)])).toEqual([
      ['user', ['text']],
      ['assistant', ['thinking', 'tool_use', 'tool_use']],
      ['user', ['tool_result', 'tool_result']],
      ['assistant', ['thinking', 'text', 'tool_use']],
      ['user', ['tool_result']],
    ]);
    expect(body.messages[1].content[0]).toEqual((responses[0]!.reasoning!.providerData as any[])[0]);
    expect(body.tools.at(-1).cache_control).toEqual({ type: 'ephemeral' });
    expect(body.messages.at(-1).content.at(-1).cache_control).toEqual({ type: 'ephemeral' });
    // The system prompt and tools were written to the cache by the first request, read by the next ones.
    expect(responses[0]!.usage.cached_tokens).toBe(0);
    expect(responses[1]!.usage.cached_tokens).toBeGreaterThan(0);
    expect(responses[1]!.usage.prompt_tokens).toBeGreaterThan(responses[1]!.usage.cached_tokens);
  });

  it('the fake refuses a thinking block with an altered signature, a tool_result without its tool_use, and a tool loop that dropped its thinking', async () => {
    fake = await startFakeLlm({ protocol: 'anthropic', script: [THREE_TURNS[0]!] });
    const settings = settingsFor('anthropic', fake, { num_retries: 0 });
    const first = await client.complete(request(settings, [{ role: 'user', content: 'go' }]));
    const tail: LlmMessage[] = first.toolCalls.map((call) => ({ role: 'tool', tool_call_id: call.id, content: 'ok' }));
    const altered = { ...first.reasoning!, providerData: (first.reasoning!.providerData as any[]).map((block) => ({ ...block, thinking: `${block.thinking} (edited)` })) };
    const refusal = (answer: Promise<LlmResponse>) => answer.then(() => new LlmError('llm_error', 'not refused'), (error: unknown) => error as LlmError);
    const failures = await Promise.all([
      refusal(client.complete(request(settings, [{ role: 'user', content: 'go' }, { ...(assistantOf(first) as any), reasoning: altered }, ...tail]))),
      refusal(client.complete(request(settings, [{ role: 'user', content: 'go' }, { role: 'tool', tool_call_id: 'toolu_nowhere', content: 'x' }]))),
      refusal(client.complete(request({ ...settings, reasoning: { effort: 'low', send_back: 'never' } }, [{ role: 'user', content: 'go' }, assistantOf(first), ...tail]))),
    ]);
    expect(failures.map((failure) => failure.code)).toEqual(['llm_bad_request', 'llm_bad_request', 'llm_bad_request']);
    expect(failures[0]!.message).toContain('Invalid `signature` in `thinking` block');
    expect(failures[1]!.message).toContain('unexpected `tool_use_id` found in `tool_result` blocks: toolu_nowhere');
    expect(failures[2]!.message).toContain('a final `assistant` message must start with a thinking block');
  });

  it('passes redacted thinking back; maps max_tokens and refusal; no thinking without an effort', async () => {
    fake = await startFakeLlm({ protocol: 'anthropic', script: [{ redactedThinking: true, toolCalls: [{ name: 'bash', arguments: { command: 'ls' } }] } as FakeTurn, { text: 'cut', finishReason: 'length' }, { refusal: 'I cannot help with that.' }, { text: 'plain' }] });
    const settings = settingsFor('anthropic', fake);
    const first = await client.complete(request(settings, [{ role: 'user', content: 'go' }]));
    expect(first.reasoning).toMatchObject({ text: '', providerData: [{ type: 'redacted_thinking', data: expect.any(String) }] });
    const history: LlmMessage[] = [{ role: 'user', content: 'go' }, assistantOf(first), { role: 'tool', tool_call_id: first.toolCalls[0]!.id, content: 'a\nb' }];
    expect(await client.complete(request(settings, history))).toMatchObject({ content: 'cut', finishReason: 'length' });
    expect(await client.complete(request(settings, [{ role: 'user', content: 'bad' }]))).toMatchObject({ content: null, refusal: 'I cannot help with that.', finishReason: 'refusal' });
    await client.complete(request({ ...settings, reasoning: null, temperature: 0.3 }, [{ role: 'user', content: 'hi' }]));
    expect((fake.requests[1]!.body as any).messages[1].content[0].type).toBe('redacted_thinking');
    expect((fake.requests[3]!.body as any).thinking).toBeUndefined();
    expect((fake.requests[3]!.body as any).temperature).toBe(0.3);
    expect(fake.violations).toEqual([]);
  });

  it('retries 529 overloaded and 429 (retry-after); "prompt is too long" is llm_context_exceeded, a spent credit balance llm_quota_exceeded', async () => {
    fake = await startFakeLlm({ protocol: 'anthropic', script: [PROTOCOL_ERRORS.anthropic.overloaded, PROTOCOL_ERRORS.anthropic.rateLimited, { text: 'finally' }, PROTOCOL_ERRORS.anthropic.contextOverflow, PROTOCOL_ERRORS.anthropic.creditTooLow] });
    const retries: LlmRetry[] = [];
    const answered = await client.complete(request(settingsFor('anthropic', fake), [{ role: 'user', content: 'hi' }], { onRetry: (retry) => retries.push(retry) }));
    expect(answered.content).toBe('finally');
    expect(retries.map((retry) => [retry.code, retry.status, retry.delayMs])).toEqual([['llm_server_error', 529, expect.any(Number)], ['llm_rate_limited', 429, 0]]);
    const overflow = (await client.complete(request(settingsFor('anthropic', fake), [{ role: 'user', content: 'hi' }])).catch((error: unknown) => error)) as LlmError;
    expect(overflow.code).toBe('llm_context_exceeded');
    expect(overflow.message).toContain('prompt is too long');
    expect(overflow.message).not.toContain('sk-ant-key');
    const broke = (await client.complete(request(settingsFor('anthropic', fake), [{ role: 'user', content: 'hi' }])).catch((error: unknown) => error)) as LlmError;
    expect(broke.code).toBe('llm_quota_exceeded');
    expect(fake.requests).toHaveLength(5);
  });
});

describe('both protocols', () => {
  for (const api of ['responses', 'anthropic'] as const) {
    it(`${api}: a stream cut or failed before any text is retried; an answer without streaming is read whole`, async () => {
      fake = await startFakeLlm({ protocol: api, script: [{ text: 'lost', dropAfterChunks: 2 }, { text: 'failed', failMidStream: true } as FakeTurn, { text: 'whole answer', toolCalls: [{ name: 'bash', arguments: { command: 'ls' } }] }, { text: 'not streamed', reasoning: 'Quietly.' }] });
      const retries: LlmRetry[] = [];
      const streamed = await client.complete(request(settingsFor(api, fake), [{ role: 'user', content: 'hi' }], { onRetry: (retry) => retries.push(retry) }));
      expect(streamed).toMatchObject({ content: 'whole answer', finishReason: 'tool_calls' });
      expect(retries.map((retry) => retry.code)).toEqual(['llm_connection_error', 'llm_server_error']);
      expect(retries[1]!.message).toMatch(api === 'anthropic' ? /Overloaded/ : /failed to generate/);
      const whole = await client.complete(request(settingsFor(api, fake, { stream: false }), [{ role: 'user', content: 'hi' }]));
      expect(fake.requests[3]!.body.stream).toBe(false);
      expect(whole).toMatchObject({ content: 'not streamed', finishReason: 'stop', reasoning: { text: 'Quietly.' } });
      expect(whole.usage.prompt_tokens).toBeGreaterThan(0);
    });
  }
});


describe('chat completions with the history kept as texts', () => {
  it('sends the kept texts without decoding the history, through the fallback router too', async () => {
    fake = await startFakeLlm({ script: [{ text: 'one' }, { text: 'two' }] });
    const messages: LlmMessage[] = [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'Run the tests.' }];
    const codec = client.codec!;
    let decoded = 0;
    const kept = (): LlmRequest => {
      const base = { settings: { model: 'fake-model', base_url: fake!.url, api_key: 'sk-test' }, tools: TOOLS, signal: new AbortController().signal, encoded: { codec, items: messages.map((message) => codec.encode(message) ?? message) } };
      // As llm-request.ts builds it: the messages decoded only if read.
      return Object.defineProperty(base, 'messages', { get: () => (decoded++, messages), enumerable: true }) as unknown as LlmRequest;
    };
    expect((await client.complete(kept())).content).toBe('one');
    expect((await new FallbackLlmClient(client).complete(kept())).content).toBe('two');
    expect(decoded).toBe(0);
    expect(fake.requests.map((recorded) => recorded.body.messages)).toEqual([messages, messages]);
  });
});
