// The body encoded from kept pieces is the body shaped and stringified whole, byte for byte,
// whatever the provider's quirks, and stays so while the history grows, is condensed or rolled back.
import { describe, expect, it } from 'vitest';
import { WIRE_MESSAGE_CODEC } from '../../src/adapters/llm/chat-message-codec.js';
import { encodeChatRequest } from '../../src/adapters/llm/chat-request-body.js';
import { shapeChatRequest } from '../../src/adapters/llm/chat-request-shape.js';
import { ConversationHistory } from '../../src/core/agent/conversation-history.js';
import type { LlmMessage, LlmRequest, LlmSettings, LlmToolSchema } from '../../src/core/agent/llm.js';
import type { AgentEvent } from '../../src/core/schemas/event.js';

const TOOLS: LlmToolSchema[] = [
  { name: 'bash', description: 'Run a command "quoted" \u2028 with odd characters', parameters: { type: 'object', properties: { command: { type: 'string' }, timeout: { type: 'number', exclusiveMinimum: 0 } }, required: ['command'], $schema: 'x' } },
  { name: 'finish', description: 'End the task.', parameters: { type: 'object', properties: { message: { const: 'done' } } } },
];

const MESSAGES: LlmMessage[] = [
  { role: 'system', content: 'You are agentd.\nUnicode: é 漢字 🚀 and "quotes" \\ backslashes' },
  { role: 'user', content: 'Do the thing' },
  { role: 'assistant', content: null, tool_calls: [{ id: 'c1', name: 'bash', arguments: '{"command":"ls"}', extra: { extra_content: { google: { thought_signature: 'sig' } } } }] },
  { role: 'tool', tool_call_id: 'c1', content: 'a.txt\nb.txt\u0000' },
  { role: 'assistant', content: 'Here it is.' },
  { role: 'assistant', content: null },
  { role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image', mediaType: 'image/png', data: 'iVBORw0KGgo=' }, { type: 'image', mediaType: 'image/png', path: 'gone.png' }] },
  { role: 'tool', tool_call_id: 'c2', content: 'last result' },
];

const SETTINGS: Partial<LlmSettings>[] = [
  {},
  { base_url: 'https://api.openai.com/v1', model: 'gpt-5', temperature: 0.3, max_output_tokens: 100, reasoning_effort: 'low' },
  { model: 'anthropic/claude-sonnet-4.5', base_url: 'https://openrouter.ai/api/v1' },
  { model: 'gemini-2.5-pro', base_url: 'https://generativelanguage.googleapis.com/v1beta/openai' },
  { base_url: 'https://x.openai.azure.com', api_version: '2024-06-01', max_output_tokens: 9, stream: false },
  { extra_body: { top_k: 20, messages: 'ignored', model: 'first', tools: [] }, extra_headers: { 'X-A': 'b' }, drop_params: ['stream_options'] },
  { drop_params: ['messages', 'tools'] },
  { prompt_cache: true, extra_body: { provider: { order: ['a'] } } },
];

function request(settings: Partial<LlmSettings>, messages: LlmMessage[], extra: Partial<LlmRequest> = {}): LlmRequest {
  return { settings: { model: 'fake-model', base_url: 'http://127.0.0.1:9/v1', ...settings }, messages, tools: TOOLS, signal: new AbortController().signal, ...extra };
}

function expectSame(req: LlmRequest): void {
  const options = { stream: true };
  const shaped = shapeChatRequest(req, options);
  const encoded = encodeChatRequest(req, options);
  expect(encoded.text).toBe(JSON.stringify(shaped.body));
  expect(encoded.headers).toEqual(shaped.headers);
  expect(encoded.stream).toBe(shaped.stream);
  if (shaped.body.messages !== undefined) expect(encoded.promptChars).toBe(JSON.stringify([shaped.body.messages, shaped.body.tools ?? []]).length);
}

describe('request body encoded from kept pieces', () => {
  it('is byte for byte the shaped body, for every provider quirk, twice in a row (the second from the cache)', () => {
    for (const settings of SETTINGS) {
      for (let end = 1; end <= MESSAGES.length; end++) {
        expectSame(request(settings, MESSAGES.slice(0, end)));
        expectSame(request(settings, MESSAGES.slice(0, end)));
      }
      expectSame(request(settings, MESSAGES, { tools: [] }));
      expectSame(request(settings, MESSAGES, { toolChoice: 'none', responseFormat: { name: 'answer', schema: { type: 'object', exclusiveMaximum: 3 } } }));
    }
  });

  it('a message marked for the prompt cache on one request is sent plain on the next, where it is no longer the last', () => {
    const settings = { model: 'anthropic/claude-sonnet-4.5', base_url: 'https://openrouter.ai/api/v1' };
    const first = JSON.parse(encodeChatRequest(request(settings, MESSAGES.slice(0, 4)), { stream: true }).text);
    expect(first.messages[3].content[0].cache_control).toEqual({ type: 'ephemeral' });
    const second = JSON.parse(encodeChatRequest(request(settings, MESSAGES.slice(0, 5)), { stream: true }).text);
    expect(second.messages[3].content).toBe('a.txt\nb.txt\u0000');
    expectSame(request(settings, MESSAGES.slice(0, 4)));
  });

  it('follows a live history through calls joining a turn, deferred messages, condensation and rollback like a fresh fold of the same events', () => {
    const events: AgentEvent[] = [];
    let seq = 0;
    const add = (event: Record<string, unknown>) => {
      const full = { id: `e${seq + 1}`, conversation_id: 'c', timestamp: '2026-01-01T00:00:00.000Z', seq: ++seq, ...event } as unknown as AgentEvent;
      events.push(full);
      live.apply(full);
    };
    // The live history keeps wire texts (what the server does); the fresh fold is decoded objects, shaped and stringified whole.
    const live = new ConversationHistory(WIRE_MESSAGE_CODEC);
    const fresh = () => {
      const history = new ConversationHistory();
      for (const event of events) history.apply(event);
      return history;
    };
    const check = () => {
      for (const settings of [{}, { model: 'anthropic/claude-sonnet-4.5', base_url: 'https://openrouter.ai/api/v1' }]) {
        const liveRequest = { ...request(settings, live.snapshot()), encoded: live.encoded() };
        const expected = JSON.stringify(shapeChatRequest(request(settings, fresh().snapshot()), { stream: true }).body);
        expect(encodeChatRequest(liveRequest, { stream: true }).text).toBe(expected);
        expect(live.snapshot()).toEqual(fresh().snapshot());
      }
    };
    add({ kind: 'system_prompt', source: 'system', content: 'sys', tools: [] });
    add({ kind: 'message', source: 'user', role: 'user', content: 'hi' });
    check();
    for (let step = 0; step < 6; step++) {
      add({ kind: 'action', source: 'agent', tool_call_id: `a${step}`, tool_name: 'bash', arguments: { command: `echo ${step}` }, llm_response_id: `r${step}`, thought: step === 0 ? 'thinking' : null });
      check(); // an open call is answered as interrupted in the request
      add({ kind: 'action', source: 'agent', tool_call_id: `b${step}`, tool_name: 'bash', arguments: { command: 'pwd' }, llm_response_id: `r${step}` });
      check(); // the second call joined the same assistant message: its new text is sent, not the cached one
      if (step === 2) add({ kind: 'message', source: 'user', role: 'user', content: 'meanwhile' });
      add({ kind: 'observation', source: 'environment', tool_call_id: `a${step}`, tool_name: 'bash', content: `out ${step}`, is_error: false, data: {} });
      add({ kind: 'observation', source: 'environment', tool_call_id: `b${step}`, tool_name: 'bash', content: '/w', is_error: false, data: {} });
      check();
    }
    add({ kind: 'condensation', source: 'system', summary: 'they ran echo', forgotten_from_seq: 3, forgotten_to_seq: 10, tokens_before: 100, tokens_after: 10, trigger: 'manual' });
    check();
    add({ kind: 'rollback', source: 'system', forgotten_from_seq: 15, forgotten_to_seq: 20 });
    check();
    add({ kind: 'system_prompt', source: 'system', content: 'sys 2', tools: [] });
    check();
    add({ kind: 'message', source: 'agent', role: 'assistant', content: 'done' });
    check();
  });

  it('the wire codec gives back every message the history makes, or keeps it as an object', () => {
    const messages: LlmMessage[] = [
      ...MESSAGES,
      { role: 'assistant', content: 'thinking', tool_calls: [{ id: 'a', name: 'bash', arguments: '{}' }, { id: 'b', name: 'x', arguments: 'not json', extra: { extra_content: { google: { thought_signature: 's' } }, index_hint: 2 } }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c', name: 'bash', arguments: '{}', extra: { type: 'custom' } }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'd', name: 'bash', arguments: '{}', extra: {} }] },
      { role: 'assistant', content: null, tool_calls: [] },
      { role: 'user', content: 'café 漢字 🚀 "q" \\ \n' },
    ];
    for (const message of messages) {
      const text = WIRE_MESSAGE_CODEC.encode(message);
      if (text === null) continue;
      expect(WIRE_MESSAGE_CODEC.decode(text)).toEqual(message);
      expect(JSON.stringify(WIRE_MESSAGE_CODEC.decode(text))).toBe(JSON.stringify(message));
    }
    // Kept as objects: images (by path, too), an assistant message with neither text nor calls, provider fields named like the call's own or empty.
    expect(messages.filter((message) => WIRE_MESSAGE_CODEC.encode(message) === null)).toHaveLength(5);
  });

  it('a request made before a call joined the turn keeps the text it had', () => {
    const history = new ConversationHistory(WIRE_MESSAGE_CODEC);
    let seq = 0;
    const apply = (event: Record<string, unknown>) => history.apply({ id: 'x', conversation_id: 'c', timestamp: 't', seq: ++seq, ...event } as unknown as AgentEvent);
    apply({ kind: 'system_prompt', source: 'system', content: 'sys', tools: [] });
    apply({ kind: 'message', source: 'user', role: 'user', content: 'hi' });
    apply({ kind: 'action', source: 'agent', tool_call_id: 'a', tool_name: 'bash', arguments: {}, llm_response_id: 'r' });
    const before = history.encoded().items;
    const frozen = JSON.stringify(before);
    apply({ kind: 'action', source: 'agent', tool_call_id: 'b', tool_name: 'bash', arguments: {}, llm_response_id: 'r' });
    expect(JSON.stringify(before)).toBe(frozen);
    const after = history.encoded().items;
    expect(after[0]).toBe(before[0]);
    expect(after[2]).not.toBe(before[2]);
    expect(JSON.parse(after[2] as string).tool_calls).toHaveLength(2);
  });
});
