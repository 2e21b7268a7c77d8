// The history as another provider may receive it: what only the provider that made a turn
// accepts is dropped or converted for a request elsewhere, and the messages given are unchanged.
import { expect, it } from 'vitest';
import { historyForTarget } from '../../src/adapters/llm/index.js';
import type { LlmMessage } from '../../src/core/agent/llm.js';

type AssistantMessage = Extract<LlmMessage, { role: 'assistant' }>;

const primary = { api: 'anthropic' as const, model: 'claude-sonnet-4', baseUrl: 'https://api.anthropic.com' };
const fallback = { api: 'chat' as const, model: 'gpt-4.1', baseUrl: 'https://api.openai.com/v1' };

const signedThinking: LlmMessage = {
  role: 'assistant',
  content: null,
  reasoning: { text: 'Let me list the files.', origin: primary, providerData: { signature: 'EqQBCgIYAhIM...' } },
  tool_calls: [{ id: 'toolu_01A09q90qw90lq917835lq9', name: 'bash', arguments: '{"command":"ls"}' }],
};
const deepSeekTurn: LlmMessage = {
  role: 'assistant',
  content: 'Done.',
  reasoning: { text: 'The user wants ls.', origin: { api: 'chat', model: 'deepseek-reasoner', baseUrl: 'https://api.deepseek.com' }, providerData: { reasoning_content: 'The user wants ls.' } },
};

it("drops another provider's reasoning for a fallback, and keeps it for the provider that made it", () => {
  const history: LlmMessage[] = [{ role: 'user', content: 'List files.' }, signedThinking, { role: 'tool', tool_call_id: 'toolu_01A09q90qw90lq917835lq9', content: 'a.txt' }, deepSeekTurn];
  const copy = structuredClone(history);
  const forFallback = historyForTarget(history, { target: fallback, assumedOrigin: primary });
  expect(forFallback[1]).toEqual({ role: 'assistant', content: null, tool_calls: (signedThinking as AssistantMessage).tool_calls });
  expect(forFallback[3]).toEqual({ role: 'assistant', content: 'Done.' });
  expect(historyForTarget(history, { target: primary, assumedOrigin: primary })[1]).toBe(signedThinking);
  expect(history).toEqual(copy);
});

it("drops a tool call's provider fields for another model, and rewrites ids outside the portable form in the call and its result", () => {
  const gemini = { api: 'chat' as const, model: 'gemini-3-pro-preview', baseUrl: 'https://generativelanguage.googleapis.com/v1beta/openai' };
  const history: LlmMessage[] = [
    { role: 'assistant', content: null, tool_calls: [{ id: 'call:1/abc', name: 'bash', arguments: '{}', extra: { extra_content: { google: { thought_signature: 'sig' } } } }] },
    { role: 'tool', tool_call_id: 'call:1/abc', content: 'ok' },
  ];
  const converted = historyForTarget(history, { target: fallback, assumedOrigin: gemini });
  const call = (converted[0] as AssistantMessage).tool_calls![0]!;
  expect(call).not.toHaveProperty('extra');
  expect(call.id).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
  expect(converted[1]).toEqual({ role: 'tool', tool_call_id: call.id, content: 'ok' });
  // The same model keeps its fields (only the id is made portable).
  expect((historyForTarget(history, { target: gemini, assumedOrigin: gemini })[0] as AssistantMessage).tool_calls![0]!.extra).toBeDefined();
});
