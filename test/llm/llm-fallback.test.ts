// Fallback models end to end: a real server, two fake LLMs (the primary and the fallback), and
// the events a client reads. Each case of issue 78: which failures move a request to the next
// model, per scope; which never do; a stream that broke after it began; a shared cooldown; a
// history from another provider accepted by a strict fallback; every model failing.
import fs from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import type { FakeLlm } from '../fake-llm/fake-llm-server.js';
import { startServer, tempDir, type TestServer } from '../support/agentd.js';
import { okJson } from '../support/json-api.js';
import { runToEnd, startedAfterEach } from '../support/run-to-end.js';

const { closing, fake, server } = startedAfterEach();

/** A conversation on `primary` with `fallback` behind it; `llm` adds or replaces settings. */
async function conversation(target: TestServer, models: { primary: FakeLlm; fallback: FakeLlm }, llm: Record<string, unknown> = {}): Promise<string> {
  const created = await okJson(target, 'POST', '/conversations', {
    llm: {
      model: 'primary-model',
      base_url: models.primary.url,
      api_key: 'sk-primary',
      retry: { max_attempts: 1 },
      fallbacks: [{ model: 'fallback-model', base_url: models.fallback.url, api_key: 'sk-fallback' }],
      ...llm,
    },
  });
  return created.id as string;
}

const ofKind = (events: any[], kind: string) => events.filter((event) => event.kind === kind);
const lastRun = async (target: TestServer, id: string) => (await okJson(target, 'GET', `/conversations/${id}/runs`)).items.at(-1);

it('moves a request to the fallback on 503, and back to the primary for the next call (scope call)', async () => {
  const primary = await fake({ script: [{ status: 503 }, { text: 'Primary again.' }] });
  const fallback = await fake({ script: [{ toolCalls: [{ name: 'bash', arguments: { command: 'echo hi' } }] }] });
  const target = await server();
  const id = await conversation(target, { primary, fallback }, { cooldown_s: 0 });
  const events = await runToEnd(target, id, 'Say hi.');
  expect(ofKind(events, 'llm_fallback')).toEqual([expect.objectContaining({ from_model: 'primary-model', to_model: 'fallback-model', reason: 'unavailable', attempt: 1 })]);
  expect(ofKind(events, 'usage').map((event) => event.model)).toEqual(['fallback-model', 'primary-model']);
  expect(ofKind(events, 'message').at(-1).content).toBe('Primary again.');
  expect(fallback.requests[0]!.headers.authorization).toBe('Bearer sk-fallback');
  const run = await lastRun(target, id);
  expect(run.models_used).toEqual(['fallback-model', 'primary-model']);
  expect(Object.keys(run.usage.by_model).sort()).toEqual(['fallback-model', 'primary-model']);
  const usage = ofKind(events, 'usage').at(-1);
  expect(Object.keys(usage.totals.by_model).sort()).toEqual(['fallback-model', 'primary-model']);
  expect(primary.violations).toEqual([]);
  expect(fallback.violations).toEqual([]);
  // The fallback's key is sealed at rest like the primary's, and never shown.
  const stored = fs.readdirSync(target.dataDir, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile()).map((entry) => fs.readFileSync(path.join(entry.parentPath, entry.name), 'latin1'));
  expect(stored.some((text) => text.includes('sk-fallback'))).toBe(false);
  expect((await okJson(target, 'GET', `/conversations/${id}`)).llm.fallbacks).toEqual([{ model: 'fallback-model', base_url: fallback.url, api_key: '**********' }]);
}, 30_000);

it('stays on the fallback for the rest of the run after a 529 (scope sticky)', async () => {
  const primary = await fake({ script: [{ status: 529, body: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } }] });
  const fallback = await fake({ script: [{ toolCalls: [{ name: 'bash', arguments: { command: 'echo hi' } }] }, { text: 'Fallback done.' }] });
  const target = await server();
  const id = await conversation(target, { primary, fallback }, { cooldown_s: 0, fallback_scope: 'sticky' });
  const events = await runToEnd(target, id, 'Say hi.');
  expect(ofKind(events, 'llm_fallback')).toEqual([expect.objectContaining({ reason: 'overloaded', to_model: 'fallback-model' })]);
  expect(primary.requests).toHaveLength(1);
  expect(fallback.requests).toHaveLength(2);
  expect((await lastRun(target, id)).models_used).toEqual(['fallback-model']);
}, 30_000);

it('falls back when the primary does not answer in time', async () => {
  const primary = await fake({ script: [{ hang: true }] });
  const fallback = await fake({ script: [{ text: 'In time.' }] });
  const target = await server();
  const id = await conversation(target, { primary, fallback }, { timeout_s: 1 });
  const events = await runToEnd(target, id, 'Hello.');
  expect(ofKind(events, 'llm_fallback')).toEqual([expect.objectContaining({ reason: 'timeout' })]);
  expect(ofKind(events, 'message').at(-1).content).toBe('In time.');
}, 30_000);

it('never falls back on an authentication error', async () => {
  const primary = await fake({ script: [], apiKey: 'the-right-key' });
  const fallback = await fake({ script: [{ text: 'Should not be asked.' }] });
  const target = await server();
  const id = await conversation(target, { primary, fallback });
  const events = await runToEnd(target, id, 'Hello.');
  expect(ofKind(events, 'llm_fallback')).toEqual([]);
  expect(ofKind(events, 'agent_error')).toEqual([expect.objectContaining({ error: 'llm_auth_error' })]);
  expect(fallback.requests).toHaveLength(0);
}, 30_000);

it('asks the same model again, never the fallback, when its stream broke after text began', async () => {
  const primary = await fake({ script: [{ text: 'This answer breaks off halfway through.', dropAfterChunks: 3 }, { text: 'Whole answer.' }] });
  const fallback = await fake({ script: [{ text: 'Should not be asked.' }] });
  const target = await server();
  const id = await conversation(target, { primary, fallback }, { retry: { max_attempts: 2 } });
  const events = await runToEnd(target, id, 'Hello.');
  expect(ofKind(events, 'llm_fallback')).toEqual([]);
  expect(ofKind(events, 'llm_retry')).toEqual([expect.objectContaining({ model: 'primary-model', reason: 'stream_interrupted', wait_s: 0 })]);
  expect(ofKind(events, 'message').at(-1).content).toBe('Whole answer.');
  expect(fallback.requests).toHaveLength(0);
}, 30_000);

it('records each retry of a model before it falls back', async () => {
  const primary = await fake({ script: [{ status: 503, retryAfter: 0 }, { status: 503, retryAfter: 0 }] });
  const fallback = await fake({ script: [{ text: 'Fallback.' }] });
  const target = await server();
  const id = await conversation(target, { primary, fallback }, { retry: { max_attempts: 2, honor_retry_after: true } });
  const events = await runToEnd(target, id, 'Hello.');
  expect(ofKind(events, 'llm_retry')).toEqual([expect.objectContaining({ model: 'primary-model', reason: 'unavailable', wait_s: 0 })]);
  expect(ofKind(events, 'llm_fallback')).toEqual([expect.objectContaining({ reason: 'unavailable', attempt: 1 })]);
  expect(primary.requests).toHaveLength(2);
}, 30_000);

it('skips a model that failed for another conversation while it cools down', async () => {
  const primary = await fake({ script: [{ status: 503 }], whenExhausted: { text: 'Primary.' } });
  const fallback = await fake({ script: [], whenExhausted: { text: 'Fallback.' } });
  const target = await server();
  const first = await conversation(target, { primary, fallback }, { cooldown_s: 600 });
  const second = await conversation(target, { primary, fallback }, { cooldown_s: 600 });
  expect(ofKind(await runToEnd(target, first, 'Hello.'), 'llm_fallback')).toEqual([expect.objectContaining({ reason: 'unavailable' })]);
  const events = await runToEnd(target, second, 'Hello.');
  expect(ofKind(events, 'llm_fallback')).toEqual([expect.objectContaining({ from_model: 'primary-model', to_model: 'fallback-model', reason: 'cooldown' })]);
  expect(ofKind(events, 'message').at(-1).content).toBe('Fallback.');
  expect(primary.requests).toHaveLength(1);
}, 30_000);

it('ends in llm_unavailable with every attempt when all models fail', async () => {
  const primary = await fake({ script: [{ status: 503 }] });
  const fallback = await fake({ script: [{ status: 529 }] });
  const target = await server();
  const id = await conversation(target, { primary, fallback });
  const events = await runToEnd(target, id, 'Hello.');
  const [error] = ofKind(events, 'agent_error');
  expect(error).toMatchObject({ error: 'llm_unavailable' });
  expect(error.details.attempts).toEqual([
    expect.objectContaining({ model: 'primary-model', reason: 'unavailable', status: 503 }),
    expect.objectContaining({ model: 'fallback-model', reason: 'overloaded', status: 529 }),
  ]);
  expect(JSON.stringify(events)).not.toContain('sk-fallback');
  expect(JSON.stringify(events)).not.toContain('sk-primary');
}, 30_000);

it("hands a Gemini history (thought signatures on its calls) to a strict fallback that accepts it", async () => {
  const primary = await fake({ provider: 'gemini', script: [{ toolCalls: [{ name: 'bash', arguments: { command: 'echo one' } }] }, { text: 'One.' }, { status: 503 }] });
  const fallback = await fake({ strictFields: true, script: [{ text: 'Two, from the fallback.' }] });
  const target = await server();
  const id = await conversation(target, { primary, fallback }, { model: 'gemini-3-pro-preview' });
  await runToEnd(target, id, 'First.');
  const events = await runToEnd(target, id, 'Second.');
  expect(ofKind(events, 'agent_error')).toEqual([]);
  expect(ofKind(events, 'message').at(-1).content).toBe('Two, from the fallback.');
  const sent = fallback.requests[0]!.body.messages!.find((message) => message.tool_calls);
  expect(sent!.tool_calls![0]).not.toHaveProperty('extra_content');
  expect(fallback.violations).toEqual([]);
  // The primary was sent the call with its signature; only the fallback's request went without.
  expect(primary.requests[1]!.body.messages!.find((message) => message.tool_calls)!.tool_calls![0]).toHaveProperty('extra_content');
  expect(primary.violations).toEqual([]);
}, 30_000);

it("keeps a fallback's key, sealed, across a restart, and reads a ${NAME} key from the conversation's secrets", async () => {
  const primary = await fake({ script: [{ status: 503 }, { status: 503 }] });
  const fallback = await fake({ script: [{ text: 'Before.' }, { text: 'After.' }], apiKey: 'sk-from-secret' });
  const dataDir = tempDir();
  closing(async () => fs.rmSync(dataDir, { recursive: true, force: true }));
  let target = await startServer({ dataDir, env: { AGENTD_WARM_SHELLS: '0' } });
  const created = await okJson(target, 'POST', '/conversations', {
    llm: { model: 'primary-model', base_url: primary.url, api_key: 'sk-primary', retry: { max_attempts: 1 }, cooldown_s: 0, fallbacks: [{ model: 'fallback-model', base_url: fallback.url, api_key: '${FALLBACK_KEY}' }] },
    secrets: { FALLBACK_KEY: 'sk-from-secret' },
  });
  const id = created.id as string;
  expect(ofKind(await runToEnd(target, id, 'One.'), 'message').at(-1).content).toBe('Before.');
  await target.close();
  target = await startServer({ dataDir, env: { AGENTD_WARM_SHELLS: '0' } });
  closing(() => target.close());
  expect((await okJson(target, 'GET', `/conversations/${id}`)).llm.fallbacks[0].api_key).toBe('**********');
  expect(ofKind(await runToEnd(target, id, 'Two.'), 'message').at(-1).content).toBe('After.');
  expect(fallback.violations).toEqual([]);
}, 60_000);

it('hands an Anthropic history with signed thinking to a strict chat fallback when the primary stays overloaded', async () => {
  const overloaded = { status: 529, body: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } } };
  const primary = await fake({ protocol: 'anthropic', script: [{ reasoning: 'The user wants one.', text: 'One.' }, overloaded, overloaded] });
  const fallback = await fake({ strictFields: true, script: [{ text: 'Two, from the fallback.' }] });
  const target = await server();
  const id = await conversation(target, { primary, fallback }, {
    api: 'anthropic',
    reasoning: { effort: 'low', send_back: 'always' },
    retry: { max_attempts: 2, min_wait_s: 0, max_wait_s: 0 },
    fallbacks: [{ model: 'fallback-model', base_url: fallback.url, api_key: 'sk-fallback', api: 'chat' }],
  });
  expect(ofKind(await runToEnd(target, id, 'First.'), 'reasoning').map((event) => event.content)).toEqual(['The user wants one.']);
  const events = await runToEnd(target, id, 'Second.');
  expect(ofKind(events, 'llm_retry').filter((event) => event.model === 'primary-model')).toHaveLength(1);
  expect(ofKind(events, 'llm_fallback')).toEqual([expect.objectContaining({ from_model: 'primary-model', to_model: 'fallback-model', reason: 'overloaded' })]);
  expect(ofKind(events, 'agent_error')).toEqual([]);
  expect(ofKind(events, 'message').at(-1).content).toBe('Two, from the fallback.');
  expect(primary.requests).toHaveLength(3);
  // The primary was sent its signed thinking back on the second turn; the fallback got the answer without it.
  expect(JSON.stringify(primary.requests[1]!.body)).toContain('"type":"thinking"');
  const answered = fallback.requests[0]!.body.messages!.find((message) => message.role === 'assistant');
  expect(answered).toEqual({ role: 'assistant', content: 'One.' });
  expect(primary.violations).toEqual([]);
  expect(fallback.violations).toEqual([]);
}, 30_000);

it('asks the same Responses model again, never the fallback, when its stream broke after text began', async () => {
  // Events: created, in_progress, output_item.added, content_part.added, then text deltas: it breaks after two of them.
  const primary = await fake({ protocol: 'responses', script: [{ text: 'This answer breaks off halfway through.', dropAfterChunks: 6 }, { text: 'Whole answer.' }] });
  const fallback = await fake({ script: [{ text: 'Should not be asked.' }] });
  const target = await server();
  const id = await conversation(target, { primary, fallback }, {
    api: 'responses',
    retry: { max_attempts: 2, min_wait_s: 0, max_wait_s: 0 },
    fallbacks: [{ model: 'fallback-model', base_url: fallback.url, api_key: 'sk-fallback', api: 'chat' }],
  });
  const events = await runToEnd(target, id, 'Hello.');
  expect(ofKind(events, 'llm_fallback')).toEqual([]);
  expect(ofKind(events, 'llm_retry')).toEqual([expect.objectContaining({ model: 'primary-model', reason: 'stream_interrupted', wait_s: 0 })]);
  expect(ofKind(events, 'message').at(-1).content).toBe('Whole answer.');
  expect(primary.requests).toHaveLength(2);
  expect(fallback.requests).toHaveLength(0);
  expect(primary.violations).toEqual([]);
}, 30_000);

it("sends a strict chat primary the turn an Anthropic fallback answered, without the fallback's thinking", async () => {
  const primary = await fake({ strictFields: true, script: [{ status: 503 }, { text: 'Primary again.' }] });
  const fallback = await fake({ protocol: 'anthropic', script: [{ reasoning: 'Anthropic thinks.', text: 'From Anthropic.' }] });
  const target = await server();
  const id = await conversation(target, { primary, fallback }, {
    cooldown_s: 0,
    reasoning: { effort: 'low', send_back: 'always' },
    fallbacks: [{ model: 'fallback-model', base_url: fallback.url, api_key: 'sk-fallback', api: 'anthropic' }],
  });
  expect(ofKind(await runToEnd(target, id, 'First.'), 'message').at(-1).content).toBe('From Anthropic.');
  const events = await runToEnd(target, id, 'Second.');
  expect(ofKind(events, 'agent_error')).toEqual([]);
  expect(ofKind(events, 'message').at(-1).content).toBe('Primary again.');
  // The call went back to the primary (scope call): the history is converted by the protocol client, not the router.
  expect(primary.requests[1]!.body.messages!.find((message) => message.role === 'assistant')).toEqual({ role: 'assistant', content: 'From Anthropic.' });
  expect(primary.violations).toEqual([]);
  expect(fallback.violations).toEqual([]);
}, 30_000);
