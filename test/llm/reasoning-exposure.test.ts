/**
 * Issue 72: a model's reasoning reaches every reader of the log like any event (REST, SSE with
 * its live `reasoning_delta`, webhooks), masked like everything else; OpenRouter's
 * `reasoning_details` go back verbatim, to the model that made them only.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { shapeChatRequest } from '../../src/adapters/llm/chat-request-shape.js';
import { OpenAiLlmClient } from '../../src/adapters/llm/openai-llm.js';
import type { LlmMessage } from '../../src/core/agent/llm.js';
import { startFakeLlm, type FakeTurn } from '../fake-llm/fake-llm-server.js';
import { connectSse } from '../support/sse-client.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

let harness: AgentHarness | undefined;
let receiver: WebhookReceiver | undefined;
afterEach(async () => {
  await harness?.close();
  await receiver?.close();
  harness = undefined;
  receiver = undefined;
});

const SECRET = 'tok-reasoning-7f3a9c21e5';
const MASK = '<secret:API_TOKEN>';

describe('reasoning in events, SSE and webhooks', () => {
  it('is recorded, streamed live and delivered, with secret values masked', { timeout: 30_000 }, async () => {
    receiver = await WebhookReceiver.start();
    harness = await startAgentHarness(
      [
        { toolCalls: [{ name: 'bash', arguments: { command: 'echo ok' } }], reasoning: `The token is ${SECRET}, so I run the check.`, chunkDelayMs: 5 },
        { text: 'Checked.', reasoning: 'It printed ok.' },
      ],
      { fake: { provider: 'vllm' }, env: { AGENTD_WEBHOOK_RETRY_BASE_MS: '20', AGENTD_WEBHOOK_RETRY_MAX_MS: '100' } },
    );
    const id = await harness.createConversation({ llm: { model: 'Qwen/Qwen3-8B', base_url: harness.llm.url, api_key: 'sk-x' }, secrets: { API_TOKEN: SECRET } });
    expect((await harness.post(`/conversations/${id}/callbacks`, { url: receiver.url })).status).toBe(201);
    const stream = await connectSse(`${harness.server.url}/conversations/${id}/events/stream`, harness.server.auth);
    expect((await harness.post(`/conversations/${id}/messages`, { content: 'run the check' })).status).toBeLessThan(300);
    await harness.waitForStatus(id, ['idle', 'error']);
    const events = await harness.events(id);
    const reasoning = events.filter((event) => event.kind === 'reasoning');
    expect(reasoning.map((event) => event.content)).toEqual([`The token is ${MASK}, so I run the check.`, 'It printed ok.']);
    expect(reasoning[0]).toMatchObject({ source: 'agent', origin: { api: 'chat', model: 'Qwen/Qwen3-8B' } });

    const last = events.at(-1).seq;
    await stream.waitFor((messages) => messages.some((message) => Number(message.id) === last));
    stream.close();
    const deltas = stream.messages.filter((message) => message.event === 'reasoning_delta');
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.every((message) => message.id === undefined)).toBe(true);
    expect(deltas.map((message) => JSON.parse(message.data).content_delta).join('')).toBe(`The token is ${MASK}, so I run the check.It printed ok.`);
    expect(stream.messages.filter((message) => message.event === 'reasoning').length).toBe(2);
    expect(JSON.stringify(stream.messages)).not.toContain(SECRET);

    await receiver.waitFor(() => receiver!.delivered.some((request) => request.json.event.seq === last), 'every event delivered', 15_000);
    const delivered = receiver.delivered.filter((request) => request.json.event.kind === 'reasoning');
    expect(delivered.map((request) => request.json.event.content)).toEqual(reasoning.map((event) => event.content));
    expect(receiver.requests.map((request) => request.body).join()).not.toContain(SECRET);
    // Never stored: the log has no deltas.
    expect(events.some((event) => event.kind === 'reasoning_delta')).toBe(false);
  });
});

describe('OpenRouter reasoning_details', () => {
  // The shape of OpenRouter's stream for a Claude model: the text, then its signature, both at index 0.
  const details = [
    { type: 'reasoning.text', text: 'Weigh both.', format: 'anthropic-claude-v1', index: 0 },
    { type: 'reasoning.text', text: '', signature: 'sig-opaque-1', format: 'anthropic-claude-v1', index: 0 },
  ];
  const script = (): FakeTurn[] => [
    {
      chunks: [
        { id: 'gen-1', choices: [{ index: 0, delta: { role: 'assistant', content: '', reasoning: 'Weigh both.', reasoning_details: [details[0]] } }] },
        { id: 'gen-1', choices: [{ index: 0, delta: { content: '', reasoning_details: [details[1]] } }] },
        { id: 'gen-1', choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'toolu_1', type: 'function', function: { name: 'bash', arguments: '{"command":"echo ok"}' } }] } }] },
        { id: 'gen-1', choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, prompt_tokens_details: { cached_tokens: 0, cache_write_tokens: 8 } } },
      ],
    },
    { text: 'Done.' },
  ];
  const merged = { type: 'reasoning.text', text: 'Weigh both.', signature: 'sig-opaque-1', format: 'anthropic-claude-v1', index: 0 };

  it('are read once (not twice beside `reasoning`), merged by index, kept opaque', async () => {
    const fake = await startFakeLlm({ provider: 'openrouter', script: script() });
    try {
      const client = new OpenAiLlmClient({ retryBaseDelayMs: 5, retryMaxDelayMs: 20 });
      const settings = { model: 'anthropic/claude-sonnet-4.5', base_url: fake.url, api_key: 'k' };
      const first = await client.complete({ settings, messages: [{ role: 'system', content: 'sys' }, { role: 'user', content: 'go' }], tools: [], signal: new AbortController().signal });
      expect(first.reasoning).toEqual({ text: 'Weigh both.', origin: { api: 'chat', model: settings.model, baseUrl: fake.url }, providerData: { reasoning_details: [merged] } });
      expect(first.usage).toMatchObject({ prompt_tokens: 10, cache_write_tokens: 8 });
    } finally {
      await fake.close();
    }
  });

  it('go back verbatim to openrouter.ai for the model that made them, as text for another', () => {
    const reasoning = { text: 'Weigh both.', origin: { api: 'chat' as const, model: 'anthropic/claude-sonnet-4.5' }, providerData: { reasoning_details: [merged] } };
    const messages: LlmMessage[] = [
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'go' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'toolu_1', name: 'bash', arguments: '{}' }], reasoning },
      { role: 'tool', tool_call_id: 'toolu_1', content: 'ok' },
    ];
    const shaped = (model: string, send_back?: 'never') =>
      shapeChatRequest({ settings: { model, base_url: 'https://openrouter.ai/api/v1', ...(send_back ? { reasoning: { send_back } } : {}) }, messages, tools: [], signal: new AbortController().signal }, { stream: true }).body.messages as Record<string, unknown>[];
    expect(shaped('anthropic/claude-sonnet-4.5')[2]).toMatchObject({ reasoning_details: [merged] });
    expect(shaped('openai/gpt-5')[2]).toMatchObject({ reasoning: 'Weigh both.' });
    expect(shaped('openai/gpt-5')[2]!.reasoning_details).toBeUndefined();
    expect(Object.keys(shaped('anthropic/claude-sonnet-4.5', 'never')[2]!)).not.toContain('reasoning_details');
  });
});
