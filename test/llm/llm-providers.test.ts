/**
 * Issue 22: agentd against the quirks of real OpenAI-compatible endpoints, reproduced by the
 * fake LLM's provider profiles. Each run goes through the real server: a conversation, a tool
 * call that runs, and an answer, with nothing the provider would reject.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { shapeChatRequest, toGeminiSchema } from '../../src/adapters/llm/chat-request-shape.js';
import type { LlmRequest } from '../../src/core/agent/llm.js';
import { PROVIDER_NAMES, type ProviderName } from '../fake-llm/provider-profiles.js';
import type { FakeLlm, FakeTurn } from '../fake-llm/fake-llm-server.js';
import { PROVIDER_ERRORS } from '../fake-llm/provider-errors.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';

let harness: AgentHarness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/** The conversation's llm for each profile, as a user of that provider would configure it. */
const LLM_OF: Record<ProviderName, (fake: FakeLlm) => Record<string, unknown>> = {
  // A reasoning model behind a gateway (not api.openai.com): still max_completion_tokens, no temperature.
  openai: (fake) => ({ model: 'gpt-5-mini', base_url: fake.url, temperature: 0.2, max_output_tokens: 4000 }),
  'azure-legacy': (fake) => ({ model: 'gpt-4o-deployment', base_url: fake.origin, api_version: '2024-06-01', max_output_tokens: 4000 }),
  gemini: (fake) => ({ model: 'gemini-3-pro-preview', base_url: fake.url, max_output_tokens: 4000 }),
  ollama: (fake) => ({ model: 'qwen3-coder:30b', base_url: fake.url }),
  vllm: (fake) => ({ model: 'Qwen/Qwen3-Coder-30B-A3B-Instruct', base_url: fake.url, max_output_tokens: 4000 }),
  openrouter: (fake) => ({ model: 'anthropic/claude-sonnet-4.5', base_url: fake.url, prompt_cache: true, extra_headers: { 'X-Title': 'agentd' } }),
  litellm: (fake) => ({ model: 'claude-sonnet-4-5', base_url: fake.url, prompt_cache: true }),
  deepseek: (fake) => ({ model: 'deepseek-v4-flash', base_url: fake.url }),
  dashscope: (fake) => ({ model: 'qwen3-235b-a22b', base_url: fake.url, extra_body: { enable_thinking: true } }),
  xai: (fake) => ({ model: 'grok-3-mini', base_url: fake.url, reasoning: { effort: 'low' } }),
  groq: (fake) => ({ model: 'qwen/qwen3-32b', base_url: fake.url }),
  mistral: (fake) => ({ model: 'magistral-medium-2507', base_url: fake.url }),
};

/** Profiles of reasoning models: their scripted answers reason first (in the profile's field). */
const REASONING: ReadonlySet<ProviderName> = new Set(['deepseek', 'dashscope', 'xai', 'groq']);

const TWO_STEPS: FakeTurn[] = [
  {
    text: 'Creating the file.',
    toolCalls: [
      { name: 'file_editor', arguments: { command: 'create', path: 'notes.txt', file_text: 'from the model\n' } },
      { name: 'bash', arguments: { command: 'wc -l notes.txt', timeout_s: 20 } },
    ],
  },
  { text: 'notes.txt has one line.' },
];

async function conversation(provider: ProviderName | undefined, script: FakeTurn[], llm: (fake: FakeLlm) => Record<string, unknown> = (fake) => ({ model: 'fake-model', base_url: fake.url })) {
  harness = await startAgentHarness(script, { fake: { ...(provider ? { provider } : {}), ...(provider === 'ollama' ? { contextTokens: 32_768 } : {}) } });
  const id = await harness.createConversation({ llm: { api_key: 'sk-provider-key', ...llm(harness.llm) }, initial_message: 'make notes.txt' });
  const done = await harness.waitForStatus(id, ['idle', 'error', 'finished', 'stuck', 'paused']);
  return { id, done, events: await harness.events(id), llm: harness.llm };
}

describe('a two-step tool-calling run against every provider profile', () => {
  for (const provider of PROVIDER_NAMES) {
    it(provider, async () => {
      const script = REASONING.has(provider) ? TWO_STEPS.map((turn) => ({ ...turn, reasoning: 'Thinking it over.' })) : TWO_STEPS;
      const { done, events, llm } = await conversation(provider, script, LLM_OF[provider]);
      expect(llm.violations).toEqual([]);
      expect(done.status, JSON.stringify(events.filter((event) => event.kind === 'agent_error'))).toBe('idle');
      expect(fs.readFileSync(path.join(done.workdir, 'notes.txt'), 'utf8')).toBe('from the model\n');
      const observations = events.filter((event) => event.kind === 'observation');
      expect(observations.map((event) => event.is_error)).toEqual([false, false]);
      expect(observations[1].content).toContain('1 notes.txt');
      expect(events.at(-2)).toMatchObject({ kind: 'message', source: 'agent', content: 'notes.txt has one line.' });
      expect(llm.requests).toHaveLength(2);
      // Old Azure api-versions stream no usage at all (they have no stream_options): nothing to count.
      if (provider !== 'azure-legacy') expect(done.usage.prompt_tokens).toBeGreaterThan(0);
    });
  }

  it('gemini: the thought signature of each call goes back with it, and tool schemas are in its dialect', async () => {
    const { events, llm } = await conversation('gemini', TWO_STEPS, LLM_OF.gemini);
    const actions = events.filter((event) => event.kind === 'action');
    expect(actions[0].provider_fields).toEqual({ extra_content: { google: { thought_signature: expect.stringMatching(/^sig-/) } } });
    const replayed = llm.requests[1]!.body.messages!.find((message) => message.role === 'assistant')!.tool_calls as unknown as Record<string, unknown>[];
    expect(replayed.map((call) => call.extra_content)).toEqual(actions.map((action) => action.provider_fields.extra_content));
    const bash = llm.requests[0]!.body.tools!.find((tool) => tool.function.name === 'bash')!;
    expect(JSON.stringify(bash.function.parameters)).not.toMatch(/exclusiveM|\$schema|additionalProperties/);
  });

  it('azure before 2024-10-21: no stream_options, max_tokens', async () => {
    const { llm } = await conversation('azure-legacy', TWO_STEPS, LLM_OF['azure-legacy']);
    const first = llm.requests[0]!;
    expect(first.path).toBe('/openai/deployments/gpt-4o-deployment/chat/completions');
    expect(first.query['api-version']).toBe('2024-06-01');
    expect(first.body.stream_options).toBeUndefined();
    expect(first.body.max_tokens).toBe(4000);
  });

  it('a reasoning model anywhere: max_completion_tokens, and no temperature', async () => {
    const { llm } = await conversation('openai', TWO_STEPS, LLM_OF.openai);
    expect(llm.requests[0]!.body).toMatchObject({ max_completion_tokens: 4000 });
    expect(llm.requests[0]!.body.temperature).toBeUndefined();
  });

  it("openrouter: the provider's cost, cached and reasoning tokens are recorded; cache_control marks the prefix; extra headers go out", async () => {
    const { done, events, llm } = await conversation('openrouter', TWO_STEPS, LLM_OF.openrouter);
    const usage = events.filter((event) => event.kind === 'usage');
    const first = llm.requests[0]!;
    expect(usage[0].cost).toBeCloseTo((usage[0].prompt_tokens * 3 + usage[0].completion_tokens * 15) / 1_000_000, 12);
    expect(usage[0].cached_tokens).toBe(Math.floor(usage[0].prompt_tokens / 2));
    expect(usage[0].reasoning_tokens).toBe(Math.floor(usage[0].completion_tokens / 3));
    expect(done.usage.cached_tokens).toBe(usage.reduce((sum, event) => sum + event.cached_tokens, 0));
    expect(first.headers['x-title']).toBe('agentd');
    const system = first.body.messages![0]!;
    expect(system.content).toEqual([{ type: 'text', text: expect.any(String), cache_control: { type: 'ephemeral' } }]);
    const lastOfSecond = llm.requests[1]!.body.messages!.at(-1)!;
    expect(lastOfSecond.role).toBe('tool');
    expect(lastOfSecond.content).toEqual([{ type: 'text', text: expect.any(String), cache_control: { type: 'ephemeral' } }]);
  });

  it('without a provider cost, the cost is computed with the cache price for cached prompt tokens', async () => {
    const prices = { input_cost_per_token: 0.000_003, cached_input_cost_per_token: 0.000_000_3, output_cost_per_token: 0.000_015 };
    const { done, events } = await conversation('litellm', TWO_STEPS, (fake) => ({ ...LLM_OF.litellm(fake), ...prices }));
    const usage = events.filter((event) => event.kind === 'usage');
    expect(usage).toHaveLength(2);
    for (const event of usage) {
      expect(event.cached_tokens).toBeGreaterThan(0);
      const expected = (event.prompt_tokens - event.cached_tokens) * prices.input_cost_per_token + event.cached_tokens * prices.cached_input_cost_per_token + event.completion_tokens * prices.output_cost_per_token;
      expect(event.cost).toBeCloseTo(expected, 12);
    }
    expect(done.usage.cost).toBeCloseTo(usage[0].cost + usage[1].cost, 12);
  });

  it('litellm: usage that rides on the finish chunk is read', async () => {
    const { events } = await conversation('litellm', TWO_STEPS, LLM_OF.litellm);
    const usage = events.filter((event) => event.kind === 'usage');
    expect(usage).toHaveLength(2);
    expect(usage[0].cached_tokens).toBe(Math.floor(usage[0].prompt_tokens / 4));
  });
});

describe('answers that cannot be used as they are', () => {
  it('content_filter: an agent error, and the partial answer is not saved', async () => {
    const { done, events } = await conversation(undefined, [{ text: 'Here is how to', finishReason: 'content_filter' }]);
    expect(done.status).toBe('error');
    expect(events.find((event) => event.kind === 'agent_error')).toMatchObject({ error: 'llm_content_filtered' });
    expect(events.filter((event) => event.kind === 'message' && event.source === 'agent')).toEqual([]);
  });

  it('arguments cut at the output limit are not run; the model is told and writes them again', async () => {
    const { done, events, llm } = await conversation(undefined, [
      { toolCalls: [{ name: 'file_editor', arguments: '{"command": "create", "path": "big.txt", "file_text": "line 1\\nline' }], finishReason: 'length' },
      { toolCalls: [{ name: 'file_editor', arguments: { command: 'create', path: 'big.txt', file_text: 'line 1\n' } }] },
      { text: 'Written in one go.' },
    ]);
    expect(done.status).toBe('idle');
    const observations = events.filter((event) => event.kind === 'observation');
    expect(observations[0]).toMatchObject({ is_error: true, data: { error: 'output_truncated' } });
    expect(observations[0].content).toContain('cut off at the output token limit');
    expect(observations[1].is_error).toBe(false);
    expect(fs.readFileSync(path.join(done.workdir, 'big.txt'), 'utf8')).toBe('line 1\n');
    expect(llm.requests[1]!.body.messages!.at(-1)!.content).toContain('Not run');
  });

  it('length with nothing in it (reasoning spent the budget): a note, and the model answers', async () => {
    const { done, events, llm } = await conversation(undefined, [{ text: '', finishReason: 'length' }, { text: 'Short answer.' }]);
    expect(done.status).toBe('idle');
    const note = events.find((event) => event.kind === 'message' && event.source === 'system');
    expect(note).toMatchObject({ role: 'user' });
    expect(note.content).toContain('output token limit');
    expect(llm.requests[1]!.body.messages!.at(-1)).toMatchObject({ role: 'user', content: note.content });
    expect(events.at(-2)).toMatchObject({ kind: 'message', source: 'agent', content: 'Short answer.' });
  });

  it('a text answer cut at the limit is kept, and the model continues it', async () => {
    const { done, events } = await conversation(undefined, [{ text: 'The first half', finishReason: 'length' }, { text: 'and the second half.' }]);
    expect(done.status).toBe('idle');
    const messages = events.filter((event) => event.kind === 'message' && event.source !== 'user').map((event) => `${event.source}:${event.content.slice(0, 20)}`);
    expect(messages).toEqual(['agent:The first half', 'system:Your last response w', 'agent:and the second half.']);
  });

  it('cut off again and again: the run ends in llm_output_truncated, not in a loop', async () => {
    const cut = { text: '', finishReason: 'length' };
    const { done, events, llm } = await conversation(undefined, [cut, cut, cut, cut, cut, cut]);
    expect(done.status).toBe('error');
    expect(events.find((event) => event.kind === 'agent_error')).toMatchObject({ error: 'llm_output_truncated' });
    expect(llm.requests).toHaveLength(4);
  });

  it('a refusal is recorded as the agent message', async () => {
    const { done, events } = await conversation(undefined, [{ refusal: "I'm sorry, I can't help with that." }]);
    expect(done.status).toBe('idle');
    expect(events.at(-2)).toMatchObject({ kind: 'message', source: 'agent', content: "I'm sorry, I can't help with that." });
  });

  it('an empty reply is nudged, and the run goes on', async () => {
    const { done, events } = await conversation(undefined, [{ text: '' }, { text: 'Here I am.' }]);
    expect(done.status).toBe('idle');
    expect(events.filter((event) => event.kind === 'message' && event.source === 'system').map((event) => event.content)).toEqual([
      'Your last response was empty. Continue the task: call a tool, or answer the user.',
    ]);
  });

  it('empty again and again: llm_empty_response, never idle with nothing recorded', async () => {
    const { done, events, llm } = await conversation(undefined, [{ text: '' }, { text: '' }, { text: '' }, { text: 'too late' }]);
    expect(done.status).toBe('error');
    expect(events.find((event) => event.kind === 'agent_error')).toMatchObject({ error: 'llm_empty_response' });
    expect(llm.requests).toHaveLength(3);
  });

  it('a stream without a finish reason is broken: retried', async () => {
    const { done, events, llm } = await conversation(undefined, [{ toolCalls: [{ name: 'glob', arguments: { pattern: '*' } }], omitFinishReason: true }, { text: 'Second try.' }]);
    expect(done.status).toBe('idle');
    expect(llm.requests).toHaveLength(2);
    expect(events.filter((event) => event.kind === 'action')).toEqual([]);
  });

  it('finish_reason "error" is retried', async () => {
    const { done, llm } = await conversation(undefined, [{ toolCalls: [{ name: 'glob', arguments: { pattern: '*' } }], finishReason: 'error' }, { text: 'Second try.' }]);
    expect(done.status).toBe('idle');
    expect(llm.requests).toHaveLength(2);
  });

  it('ollama cutting the prompt to its context window is a context overflow that names OLLAMA_CONTEXT_LENGTH', async () => {
    harness = await startAgentHarness([{ text: 'an answer to half a prompt' }], { fake: { provider: 'ollama', contextTokens: 1024 } });
    const id = await harness.createConversation({ llm: { model: 'llama3.2', base_url: harness.llm.url }, initial_message: 'x'.repeat(20_000) });
    const done = await harness.waitForStatus(id, ['idle', 'error']);
    expect(done.status).toBe('error');
    const error = (await harness.events(id)).find((event) => event.kind === 'agent_error');
    expect(error.error).toBe('llm_context_exceeded');
    expect(error.message).toContain('OLLAMA_CONTEXT_LENGTH');
  });
});

describe('provider errors through a conversation', () => {
  for (const [family, errors] of Object.entries(PROVIDER_ERRORS)) {
    it(`${family}: a context overflow ends the run with llm_context_exceeded after one request, never retried`, async () => {
      const { done, events, llm } = await conversation(undefined, [errors.contextOverflow, { text: 'never sent' }]);
      expect(done.status).toBe('error');
      expect(events.find((event) => event.kind === 'agent_error')).toMatchObject({ error: 'llm_context_exceeded' });
      expect(llm.requests).toHaveLength(1);
    });
  }

  it('insufficient_quota ends the run with llm_quota_exceeded after one request', async () => {
    const { done, events, llm } = await conversation(undefined, [PROVIDER_ERRORS.openai.insufficientQuota, { text: 'never sent' }]);
    expect(done.status).toBe('error');
    expect(events.find((event) => event.kind === 'agent_error')).toMatchObject({ error: 'llm_quota_exceeded' });
    expect(llm.requests).toHaveLength(1);
  });

  it('a 429 with reset headers, then one without: both retried, and the run goes on', async () => {
    const bare = { status: 429, body: { error: { message: 'Rate limit reached', type: 'requests', code: 'rate_limit_exceeded' } } };
    const { done, events, llm } = await conversation(undefined, [PROVIDER_ERRORS.openai.rateLimitedWithReset, bare, { text: 'After the wait.' }]);
    expect(done.status).toBe('idle');
    expect(llm.requests).toHaveLength(3);
    expect(events.at(-2)).toMatchObject({ kind: 'message', source: 'agent', content: 'After the wait.' });
  });
});

describe('prompt caching', () => {
  it("each request's messages extend the previous request's, unchanged", async () => {
    const { done, llm } = await conversation(undefined, [
      { text: 'Step one.', toolCalls: [{ name: 'bash', arguments: { command: 'echo one' } }] },
      { toolCalls: [{ name: 'file_editor', arguments: { command: 'create', path: 'a.txt', file_text: 'a\n' } }, { name: 'glob', arguments: { pattern: '*.txt' } }] },
      { toolCalls: [{ name: 'task_tracker', arguments: { command: 'view' } }] },
      { text: 'Done.' },
    ]);
    expect(done.status).toBe('idle');
    expect(llm.requests).toHaveLength(4);
    for (let i = 1; i < llm.requests.length; i++) {
      const before = llm.requests[i - 1]!.body;
      const after = llm.requests[i]!.body;
      expect(after.messages!.slice(0, before.messages!.length)).toEqual(before.messages);
      expect(after.messages!.length).toBeGreaterThan(before.messages!.length);
      expect(after.tools).toEqual(before.tools);
    }
  });
});

describe('the request shape', () => {
  const request = (settings: Partial<LlmRequest['settings']>, tools: LlmRequest['tools'] = []): LlmRequest => ({
    settings: { model: 'm', ...settings },
    messages: [{ role: 'system', content: 's' }, { role: 'user', content: 'u' }],
    tools,
    signal: new AbortController().signal,
  });

  it('drop_params, extra_body and extra_headers apply; extra_body cannot replace the messages', () => {
    const shaped = shapeChatRequest(request({ temperature: 0.5, top_p: 0.9, drop_params: ['top_p', 'stream_options'], extra_body: { top_k: 20, provider: { sort: 'price' } }, extra_headers: { 'HTTP-Referer': 'https://example.test' } }), { stream: true });
    expect(shaped.body).toMatchObject({ temperature: 0.5, top_k: 20, provider: { sort: 'price' }, stream: true });
    expect(shaped.body.top_p).toBeUndefined();
    expect(shaped.body.stream_options).toBeUndefined();
    expect(shaped.headers).toEqual({ 'HTTP-Referer': 'https://example.test' });
  });

  it('max_tokens_param and stream_usage override what is detected', () => {
    expect(shapeChatRequest(request({ base_url: 'https://api.openai.com/v1', max_output_tokens: 9, max_tokens_param: 'max_tokens', stream_usage: false }), { stream: true }).body).toMatchObject({ max_tokens: 9, stream: true });
    expect(shapeChatRequest(request({ base_url: 'http://vllm:8000/v1', max_output_tokens: 9 }), { stream: true }).body).toMatchObject({ max_tokens: 9, stream_options: { include_usage: true } });
    expect(shapeChatRequest(request({ base_url: 'http://vllm:8000/v1', stream: false }), { stream: true }).body.stream_options).toBeUndefined();
  });

  it('cache_control is on by default only for Claude behind OpenRouter or LiteLLM', () => {
    const marked = (settings: Partial<LlmRequest['settings']>) => Array.isArray(shapeChatRequest(request(settings), { stream: true }).body.messages && (shapeChatRequest(request(settings), { stream: true }).body.messages as { content: unknown }[])[0]!.content);
    expect(marked({ model: 'anthropic/claude-sonnet-4.5', base_url: 'https://openrouter.ai/api/v1' })).toBe(true);
    expect(marked({ model: 'claude-sonnet-4-5', base_url: 'http://litellm.internal:4000' })).toBe(true);
    expect(marked({ model: 'anthropic/claude-sonnet-4.5', base_url: 'https://openrouter.ai/api/v1', prompt_cache: false })).toBe(false);
    expect(marked({ model: 'openai/gpt-4o', base_url: 'https://openrouter.ai/api/v1' })).toBe(false);
    expect(marked({ model: 'claude-sonnet-4-5', base_url: 'https://api.anthropic.com/v1' })).toBe(false);
  });

  it("Gemini's schema dialect: exclusive bounds, const, nullable types", () => {
    expect(toGeminiSchema({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      additionalProperties: false,
      properties: { n: { type: 'number', exclusiveMinimum: 0 }, k: { const: 'view' }, s: { type: ['string', 'null'] } },
      required: ['n'],
    })).toEqual({ type: 'object', properties: { n: { type: 'number', minimum: 0 }, k: { enum: ['view'] }, s: { type: 'string', nullable: true } }, required: ['n'] });
  });
});
