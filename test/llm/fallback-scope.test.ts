// The fallback router's scopes, on the client itself against two fake LLMs: `call` starts each
// request at the primary, `turn` stays on the fallback until the user's next message, `sticky`
// for the rest of the run (the routing state a run keeps between its requests).
import { afterEach, expect, it } from 'vitest';
import { FallbackLlmClient, ModelCooldowns, OpenAiLlmClient } from '../../src/adapters/llm/index.js';
import type { LlmFallback, LlmRequest, LlmRouting, LlmSettings } from '../../src/core/agent/llm.js';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function models(): Promise<{ primary: FakeLlm; fallback: FakeLlm }> {
  const primary = await startFakeLlm({ script: [{ status: 503 }], whenExhausted: { text: 'primary' } });
  const fallback = await startFakeLlm({ script: [], whenExhausted: { text: 'fallback' } });
  closers.push(() => primary.close(), () => fallback.close());
  return { primary, fallback };
}

function ask(client: FallbackLlmClient, settings: LlmSettings, routing: LlmRouting, fallbacks: LlmFallback[]): Promise<string | null> {
  const request: LlmRequest = {
    settings,
    messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Hi.' }],
    tools: [],
    signal: new AbortController().signal,
    routing,
    onFallback: (fallback) => fallbacks.push(fallback),
  };
  return client.complete(request).then((response) => response.content);
}

for (const [scope, expected] of [
  ['call', ['fallback', 'primary', 'primary']],
  ['turn', ['fallback', 'fallback', 'primary']],
  ['sticky', ['fallback', 'fallback', 'fallback']],
] as const) {
  it(`answers from ${expected.join(', ')} with scope ${scope} (the third request after a new user message)`, async () => {
    const { primary, fallback } = await models();
    const client = new FallbackLlmClient(new OpenAiLlmClient(), new ModelCooldowns());
    const settings: LlmSettings = { model: 'primary-model', base_url: primary.url, api_key: 'k', retry: { max_attempts: 1 }, cooldown_s: 0, fallback_scope: scope, fallbacks: [{ model: 'fallback-model', base_url: fallback.url }] };
    const routing: LlmRouting = { turn: 1 };
    const fallbacks: LlmFallback[] = [];
    const answers = [await ask(client, settings, routing, fallbacks), await ask(client, settings, routing, fallbacks)];
    routing.turn = 2;
    answers.push(await ask(client, settings, routing, fallbacks));
    expect(answers).toEqual(expected);
    expect(fallbacks).toEqual([{ fromModel: 'primary-model', toModel: 'fallback-model', reason: 'unavailable', attempt: 1 }]);
    // A fallback with its own base_url never gets the primary's key.
    expect(fallback.requests.every((request) => request.headers.authorization !== 'Bearer k')).toBe(true);
  }, 30_000);
}
