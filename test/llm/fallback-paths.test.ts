// Fallback models on every path an LLM request takes, end to end: a real server, two fake LLMs
// (the primary and the fallback), and the events a client reads. Scope `turn` across a run whose
// next user message arrives mid-run; a condensation summary whose primary fails, in a run and
// between runs; a subagent whose primary fails.
import { expect, it } from 'vitest';
import type { FakeLlm } from '../fake-llm/fake-llm-server.js';
import type { TestServer } from '../support/agentd.js';
import { okJson } from '../support/json-api.js';
import { runToEnd, startedAfterEach } from '../support/run-to-end.js';
import { until } from '../support/reliability.js';

const { fake, server } = startedAfterEach();

/** A conversation on `primary` with `fallback` behind it, whose key is the conversation's secret FALLBACK_KEY; `body` adds to the request. */
async function conversation(target: TestServer, models: { primary: FakeLlm; fallback: FakeLlm }, options: { llm?: Record<string, unknown>; body?: Record<string, unknown> } = {}): Promise<string> {
  const created = await okJson(target, 'POST', '/conversations', {
    llm: {
      model: 'primary-model',
      base_url: models.primary.url,
      api_key: 'sk-primary',
      retry: { max_attempts: 1 },
      cooldown_s: 0,
      fallbacks: [{ model: 'fallback-model', base_url: models.fallback.url, api_key: '${FALLBACK_KEY}' }],
      ...options.llm,
    },
    secrets: { FALLBACK_KEY: 'sk-from-secret' },
    ...options.body,
  });
  return created.id as string;
}

const events = async (target: TestServer, id: string): Promise<any[]> => (await okJson(target, 'GET', `/conversations/${id}/events?limit=1000`)).items;
const ofKind = (list: any[], kind: string) => list.filter((event) => event.kind === kind);
const bash = (command: string) => ({ toolCalls: [{ name: 'bash', arguments: { command } }] });

it('stays on the fallback for the rest of the turn, and tries the primary again at the next user message of the same run (scope turn)', async () => {
  const target = await server();
  let id = '';
  const primary = await fake({ script: [{ status: 503 }, { text: 'Primary answers the second message.' }] });
  const fallback = await fake({
    apiKey: 'sk-from-secret',
    script: [
      bash('echo one'),
      // The user's next message arrives while the model answers: the run takes it at its next turn.
      async () => {
        await okJson(target, 'POST', `/conversations/${id}/messages`, { content: 'Second.', run: true, multitask_strategy: 'enqueue' });
        return bash('echo two');
      },
    ],
  });
  id = await conversation(target, { primary, fallback }, { llm: { fallback_scope: 'turn' } });
  const all = await runToEnd(target, id, 'First.');
  // The 503 moved the turn's first request; its second went to the fallback without asking the primary.
  expect(ofKind(all, 'llm_fallback')).toEqual([expect.objectContaining({ from_model: 'primary-model', to_model: 'fallback-model', reason: 'unavailable', attempt: 1 })]);
  const usage = ofKind(all, 'usage');
  expect(usage.map((event) => event.model)).toEqual(['fallback-model', 'fallback-model', 'primary-model']);
  // One run: the stay ended with the user's message, not with a new run.
  expect(new Set(usage.map((event) => event.run_id)).size).toBe(1);
  expect(ofKind(all, 'message').find((event) => event.content === 'Second.')).toMatchObject({ multitask_strategy: 'enqueue' });
  expect(primary.requests).toHaveLength(2);
  expect(fallback.requests).toHaveLength(2);
  expect(primary.requests[1]!.body.messages!.at(-1)).toEqual({ role: 'user', content: 'Second.' });
  expect(ofKind(all, 'message').at(-1).content).toBe('Primary answers the second message.');
  expect((await okJson(target, 'GET', `/conversations/${id}/runs`)).items.at(-1).models_used).toEqual(['fallback-model', 'primary-model']);
  expect(fallback.violations).toEqual([]);
}, 30_000);

it("records a condensation summary's retry and fallback when the primary fails with 503, and its usage under the model that wrote it", async () => {
  // The system prompt and the tools take about 6,000 tokens; the first two results about 4,800 each: the third request would pass 12,000.
  const primary = await fake({
    script: [bash('seq 1 4000; echo first-step'), bash('seq 1 4000; echo second-step'), bash('echo third-step'), { text: 'all done' }],
    summarizer: () => ({ status: 503 }),
  });
  const fallback = await fake({ apiKey: 'sk-from-secret', summarizer: true });
  const target = await server();
  const id = await conversation(target, { primary, fallback }, { llm: { retry: { max_attempts: 2, min_wait_s: 0, max_wait_s: 0 } }, body: { condenser: { max_tokens: 12_000, keep_first: 1, keep_last: 2 } } });
  const all = await runToEnd(target, id, 'run three steps');
  const runId = ofKind(all, 'usage')[0].run_id;
  const [condensation] = ofKind(all, 'condensation');
  expect(condensation).toMatchObject({ trigger: 'auto', run_id: runId });
  expect(primary.summaryRequests).toHaveLength(2);
  expect(fallback.summaryRequests).toHaveLength(1);
  const [retry] = ofKind(all, 'llm_retry');
  const [moved] = ofKind(all, 'llm_fallback');
  expect(ofKind(all, 'llm_retry')).toEqual([expect.objectContaining({ model: 'primary-model', reason: 'unavailable', wait_s: 0, run_id: runId })]);
  expect(ofKind(all, 'llm_fallback')).toEqual([expect.objectContaining({ from_model: 'primary-model', to_model: 'fallback-model', reason: 'unavailable', attempt: 1, run_id: runId })]);
  // In the order they happened: the retry, the move, the summary's usage, the condensation.
  const summaryUsage = ofKind(all, 'usage').find((event) => event.model === 'fallback-model');
  expect(summaryUsage).toMatchObject({ run_id: runId });
  expect([retry.seq < moved.seq, moved.seq < summaryUsage.seq, summaryUsage.seq < condensation.seq]).toEqual([true, true, true]);
  // The run's own requests stayed on the primary (scope call), and went on to the end.
  expect(ofKind(all, 'usage').filter((event) => event !== summaryUsage).map((event) => event.model)).toEqual(['primary-model', 'primary-model', 'primary-model', 'primary-model']);
  expect(ofKind(all, 'message').at(-1).content).toBe('all done');
  const conversationUsage = (await okJson(target, 'GET', `/conversations/${id}`)).usage;
  expect(Object.keys(conversationUsage.by_model).sort()).toEqual(['fallback-model', 'primary-model']);
  expect((await okJson(target, 'GET', `/conversations/${id}/runs`)).items.at(-1).models_used).toEqual(['primary-model', 'fallback-model']);
  expect(fallback.violations).toEqual([]);
}, 30_000);

it('records the fallback of a POST /condense between runs, with no run', async () => {
  const primary = await fake({ script: [bash('echo one'), bash('echo two'), bash('echo three'), { text: 'done' }], summarizer: () => ({ status: 503 }) });
  const fallback = await fake({ apiKey: 'sk-from-secret', summarizer: true });
  const target = await server();
  const id = await conversation(target, { primary, fallback }, { body: { condenser: { keep_last: 2 } } });
  await runToEnd(target, id, 'count to three');
  const accepted = await okJson(target, 'POST', `/conversations/${id}/condense`, {});
  expect(accepted.run_id).toBeNull();
  await until(async () => ofKind(await events(target, id), 'condensation').length > 0, 'the condensation');
  const all = await events(target, id);
  expect(ofKind(all, 'agent_error')).toEqual([]);
  expect(ofKind(all, 'condensation')).toEqual([expect.objectContaining({ trigger: 'manual', run_id: null })]);
  expect(ofKind(all, 'llm_fallback')).toEqual([expect.objectContaining({ from_model: 'primary-model', to_model: 'fallback-model', reason: 'unavailable', run_id: null })]);
  expect(ofKind(all, 'usage').at(-1)).toMatchObject({ model: 'fallback-model', run_id: null });
  expect(fallback.summaryRequests[0]!.headers.authorization).toBe('Bearer sk-from-secret');
}, 30_000);

it("moves a subagent's request to the fallback, with its events and usage tagged as the subagent's", async () => {
  const primary = await fake({
    script: [{ toolCalls: [{ id: 'task_one', name: 'task', arguments: { description: 'one part', prompt: 'SUB-JOB: say one' } }] }, { text: 'Parent done.' }],
    routes: [{ when: 'SUB-JOB', script: [{ status: 503 }] }],
  });
  const fallback = await fake({ apiKey: 'sk-from-secret', script: [{ text: 'Sub result from the fallback.' }] });
  const target = await server();
  const id = await conversation(target, { primary, fallback });
  const all = await runToEnd(target, id, 'Delegate.');
  const tags = { parent_tool_call_id: 'task_one', agent: 'general-purpose' };
  expect(ofKind(all, 'llm_fallback')).toEqual([expect.objectContaining({ from_model: 'primary-model', to_model: 'fallback-model', reason: 'unavailable', ...tags })]);
  expect(ofKind(all, 'usage').map((event) => [event.model, event.parent_tool_call_id ?? null])).toEqual([
    ['primary-model', null],
    ['fallback-model', 'task_one'],
    ['primary-model', null],
  ]);
  expect(ofKind(all, 'observation').find((event) => event.tool_call_id === 'task_one')).toMatchObject({ is_error: false, content: 'Sub result from the fallback.' });
  const run = (await okJson(target, 'GET', `/conversations/${id}/runs`)).items.at(-1);
  expect(run.models_used).toEqual(['primary-model', 'fallback-model']);
  expect(Object.keys(run.usage.by_model).sort()).toEqual(['fallback-model', 'primary-model']);
  expect(fallback.violations).toEqual([]);
}, 30_000);
