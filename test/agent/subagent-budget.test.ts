// Budgets across runs that delegate to subagents, end to end: a real server, the fake LLM (the
// subagents' requests routed to scripts of their own), and the events a client reads. A subagent
// spends from its run: it checks the conversation's budget and its owner's spend limit before each
// request, its usage is priced by the model that answered, and a limit it reaches ends its run
// too, with one `budget_exceeded` event.
import { expect, it } from 'vitest';
import type { FakeTurn } from '../fake-llm/fake-llm-server.js';
import { adminCall, client, USER_SCOPES } from '../support/access-matrix.js';
import type { TestServer } from '../support/agentd.js';
import { okJson } from '../support/json-api.js';
import { runToEnd, startedAfterEach } from '../support/run-to-end.js';
import { until } from '../support/reliability.js';

const { fake, server } = startedAfterEach();

const USAGE = { prompt_tokens: 1000, completion_tokens: 100 };
const bash = (command: string, usage = USAGE): FakeTurn => ({ toolCalls: [{ name: 'bash', arguments: { command } }], usage });
const task = (id: string, usage = USAGE): FakeTurn => ({ toolCalls: [{ id, name: 'task', arguments: { description: 'a part', prompt: `SUB-JOB ${id}: run the steps` } }], usage });
const text = (content: string, usage = USAGE): FakeTurn => ({ text: content, usage });

const ofKind = (events: any[], kind: string) => events.filter((event) => event.kind === kind);
const lastRun = async (target: TestServer, id: string) => (await okJson(target, 'GET', `/conversations/${id}/runs`)).items.at(-1);

it("pauses a run within one request of its budget when a subagent reaches it (per run), once, and goes on when raised", async () => {
  const llm = await fake({ script: [task('task_a'), text('Parent done.')], routes: [{ when: 'SUB-JOB', script: [bash('echo one'), bash('echo two'), text('Sub done.')] }] });
  const target = await server();
  const { id } = await okJson(target, 'POST', '/conversations', { llm: { model: 'fake-model', base_url: llm.url, api_key: 'k' }, budget: { max_tokens: 3000, per: 'run', on_exceed: 'pause' } });
  const events = await runToEnd(target, id, 'Delegate.');
  // The parent's task call and the subagent's two steps: 3 × 1,100 tokens. The subagent's next request is never made, nor the parent's.
  expect(llm.requests).toHaveLength(3);
  expect(ofKind(events, 'budget_exceeded')).toEqual([
    expect.objectContaining({ parent_tool_call_id: 'task_a', agent: 'general-purpose', per: 'run', action: 'pause', limit: { max_tokens: 3000 }, used: { cost_usd: 0, tokens: 3300 } }),
  ]);
  expect(ofKind(events, 'observation').find((event) => event.tool_call_id === 'task_a')).toMatchObject({ is_error: true, content: expect.stringContaining('reached its budget'), data: { outcome: 'budget_exceeded' } });
  expect((await okJson(target, 'GET', `/conversations/${id}`)).status).toBe('paused');
  const run = await lastRun(target, id);
  expect(run).toMatchObject({ status: 'paused', outcome: 'budget_exceeded' });
  // The subagent's usage names its model: the split by model holds every request.
  expect(ofKind(events, 'usage').filter((event) => event.parent_tool_call_id === 'task_a').map((event) => event.model)).toEqual(['fake-model', 'fake-model']);
  expect(run.usage.by_model['fake-model']).toMatchObject({ prompt_tokens: 3000, completion_tokens: 300 });
  expect(run.models_used).toEqual(['fake-model']);

  await okJson(target, 'PUT', `/conversations/${id}/config`, { budget: { max_tokens: 100_000, per: 'run', on_exceed: 'pause' } });
  await okJson(target, 'POST', `/conversations/${id}/run`);
  await until(async () => (await okJson(target, 'GET', `/conversations/${id}`)).status === 'idle', 'the continued run to end');
  const after = (await okJson(target, 'GET', `/conversations/${id}/events?limit=1000`)).items as any[];
  expect(ofKind(after, 'message').at(-1).content).toBe('Parent done.');
  expect(ofKind(after, 'budget_exceeded')).toHaveLength(1);
}, 30_000);

it("stops the conversation at its budget (per conversation) inside a later run's subagent, its usage priced by the built-in table", async () => {
  const llm = await fake({ script: [bash('echo one'), text('First done.'), task('task_b'), text('Never asked.')], routes: [{ when: 'SUB-JOB', script: [bash('echo a'), bash('echo b'), text('Sub done.')] }] });
  const target = await server();
  const { id } = await okJson(target, 'POST', '/conversations', { llm: { model: 'gpt-4o-mini', base_url: llm.url, api_key: 'k' }, budget: { max_cost_usd: 0.001, per: 'conversation', on_exceed: 'stop' } });
  await runToEnd(target, id, 'Start.');
  const events = await runToEnd(target, id, 'Delegate.');
  // 1000 × $0.15/M + 100 × $0.60/M = $0.00021 a request, the subagent's too: the fifth reaches $0.001 (two in the first run, the task call and two subagent steps).
  expect(llm.requests).toHaveLength(5);
  const subagentUsage = ofKind(events, 'usage').filter((event) => event.parent_tool_call_id === 'task_b');
  expect(subagentUsage.map((event) => event.model)).toEqual(['gpt-4o-mini', 'gpt-4o-mini']);
  for (const usage of subagentUsage) expect(usage.cost).toBeCloseTo(0.00021, 10);
  const [breach] = ofKind(events, 'budget_exceeded');
  expect(ofKind(events, 'budget_exceeded')).toHaveLength(1);
  expect(breach).toMatchObject({ parent_tool_call_id: 'task_b', per: 'conversation', action: 'stop' });
  expect(breach.used.cost_usd).toBeCloseTo(0.00105, 10);
  // The run stops as its subagent did: one agent_error, the run's own.
  const errors = ofKind(events, 'agent_error');
  expect(errors).toEqual([expect.objectContaining({ error: 'budget_exceeded' })]);
  expect(errors[0].parent_tool_call_id).toBeUndefined();
  expect((await okJson(target, 'GET', `/conversations/${id}`)).status).toBe('error');
}, 30_000);

it("tells a notify budget once per run, whichever agent reaches it, and lets the run and its subagent go on", async () => {
  const llm = await fake({ script: [task('task_c'), text('Parent done.')], routes: [{ when: 'SUB-JOB', script: [bash('echo one'), text('Sub done.')] }] });
  const target = await server({ AGENTD_BUDGET: JSON.stringify({ max_tokens: 2000, on_exceed: 'notify' }) });
  const { id } = await okJson(target, 'POST', '/conversations', { llm: { model: 'fake-model', base_url: llm.url, api_key: 'k' } });
  const events = await runToEnd(target, id, 'Delegate.');
  expect(llm.requests).toHaveLength(4);
  // Reached before the subagent's second request (2,200 tokens): told there, not again by the parent.
  expect(ofKind(events, 'budget_exceeded')).toEqual([expect.objectContaining({ parent_tool_call_id: 'task_c', action: 'notify', per: 'run', used: { cost_usd: 0, tokens: 2200 } })]);
  expect(ofKind(events, 'observation').find((event) => event.tool_call_id === 'task_c')).toMatchObject({ is_error: false, content: 'Sub done.' });
  expect((await okJson(target, 'GET', `/conversations/${id}`)).status).toBe('idle');
}, 30_000);

it("pauses a run whose subagent brings its owner's spend to the key's limit, before the subagent's next request", async () => {
  const spend = { prompt_tokens: 1000, completion_tokens: 1000 };
  const llm = await fake({ script: [task('task_d', spend), text('Parent done.', spend)], routes: [{ when: 'SUB-JOB', script: [bash('true', spend), bash('true', spend), text('Sub done.', spend)] }] });
  const target = await server();
  const created = await adminCall(target.url)('POST', '/keys', { name: 'ivan', owner: 'ivan', scopes: USER_SCOPES, limits: { max_cost_usd: 0.003, budget_period: 'total' } });
  expect(created.status).toBe(201);
  const call = client(target.url, created.body.secret);
  // Each answer costs $0.002 at these prices: the parent's task call, then the subagent's first step passes the limit.
  const conversation = await call('POST', '/conversations', { llm: { model: 'fake', base_url: llm.url, api_key: 'k', input_cost_per_token: 0.000001, output_cost_per_token: 0.000001 }, initial_message: 'Delegate.' });
  expect(conversation.status).toBe(201);
  const id = conversation.body.id as string;
  await until(async () => (await call('GET', `/conversations/${id}`)).body.status !== 'running', 'the run to end');
  expect((await call('GET', `/conversations/${id}`)).body.status).toBe('paused');
  expect(llm.requests).toHaveLength(2);
  const events = (await call('GET', `/conversations/${id}/events?limit=1000`)).body.items as any[];
  expect(ofKind(events, 'observation').find((event) => event.tool_call_id === 'task_d')).toMatchObject({ is_error: true, content: expect.stringContaining('spend limit') });
  expect(ofKind(events, 'state_update').at(-1)).toMatchObject({ status: 'paused', reason: expect.stringMatching(/spend limit/) });
}, 30_000);
