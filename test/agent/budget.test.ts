// Budgets end to end: a real server, the fake LLM, and the events a client reads. A run stops or
// pauses before the LLM request that follows the one that reached its limit, with the cost the
// provider reported, or else the price table's (built in, or the operator's AGENTD_PRICES_FILE).
import fs from 'node:fs';
import path from 'node:path';
import { expect, it } from 'vitest';
import { tempDir } from '../support/agentd.js';
import { okJson, requestJson } from '../support/json-api.js';
import { runToEnd, startedAfterEach } from '../support/run-to-end.js';

const { closing, fake, server } = startedAfterEach();

const bash = (command: string) => ({ toolCalls: [{ name: 'bash', arguments: { command } }], usage: { prompt_tokens: 1000, completion_tokens: 100 } });

const ofKind = (events: any[], kind: string) => events.filter((event) => event.kind === kind);

it("pauses a run at its budget, priced by the provider's reported cost", async () => {
  const llm = await fake({ provider: 'openrouter', script: [bash('echo one'), bash('echo two'), { text: 'Done.' }] });
  const target = await server();
  const { id } = await okJson(target, 'POST', '/conversations', {
    llm: { model: 'anthropic/claude-sonnet-4', base_url: llm.url, api_key: 'k' },
    budget: { max_cost_usd: 0.001, per: 'run', on_exceed: 'pause' },
  });
  const events = await runToEnd(target, id, 'Work.');
  // (1000 × 3 + 100 × 15) / 1e6 = $0.0045 reported by the first answer: the second request is never made.
  expect(llm.requests).toHaveLength(1);
  expect(ofKind(events, 'budget_exceeded')).toEqual([expect.objectContaining({ limit: { max_cost_usd: 0.001 }, per: 'run', action: 'pause', used: { cost_usd: 0.0045, tokens: 1100 } })]);
  const conversation = await okJson(target, 'GET', `/conversations/${id}`);
  expect(conversation.status).toBe('paused');
  expect(conversation.budget).toEqual({ max_cost_usd: 0.001, per: 'run', on_exceed: 'pause' });
  expect((await okJson(target, 'GET', `/conversations/${id}/runs`)).items.at(-1)).toMatchObject({ status: 'paused', outcome: 'budget_exceeded' });
}, 30_000);

it('stops a conversation at its budget, priced by the built-in price table when the provider reports no cost', async () => {
  const llm = await fake({ script: [bash('echo one'), bash('echo two'), { text: 'Done.' }] });
  const target = await server();
  const { id } = await okJson(target, 'POST', '/conversations', {
    llm: { model: 'gpt-4o-mini', base_url: llm.url, api_key: 'k' },
    budget: { max_cost_usd: 0.0003, per: 'conversation', on_exceed: 'stop' },
  });
  const events = await runToEnd(target, id, 'Work.');
  // 1000 × $0.15/M + 100 × $0.60/M = $0.00021 a request: the second one reaches the limit, the third is never made.
  expect(llm.requests).toHaveLength(2);
  expect(ofKind(events, 'usage')[0].cost).toBeCloseTo(0.00021, 10);
  expect(ofKind(events, 'budget_exceeded')).toEqual([expect.objectContaining({ per: 'conversation', action: 'stop' })]);
  expect(ofKind(events, 'agent_error')).toEqual([expect.objectContaining({ error: 'budget_exceeded' })]);
  expect((await okJson(target, 'GET', `/conversations/${id}`)).status).toBe('error');
}, 30_000);

it("applies the server's default budget with the operator's prices, and notify lets the run go on once told", async () => {
  const dir = tempDir();
  closing(async () => fs.rmSync(dir, { recursive: true, force: true }));
  const prices = path.join(dir, 'prices.json');
  fs.writeFileSync(prices, JSON.stringify({ 'house-model': { input_cost_per_token: 0.001, output_cost_per_token: 0.002 } }));
  const llm = await fake({ script: [bash('echo one'), bash('echo two'), { text: 'Done.' }] });
  const target = await server({ AGENTD_PRICES_FILE: prices, AGENTD_BUDGET: JSON.stringify({ max_cost_usd: 1, on_exceed: 'notify' }) });
  const { id } = await okJson(target, 'POST', '/conversations', { llm: { model: 'house-model', base_url: llm.url, api_key: 'k' } });
  const events = await runToEnd(target, id, 'Work.');
  // 1000 × $0.001 + 100 × $0.002 = $1.20 from the first answer: told once, the run goes on to its answer.
  expect(llm.requests).toHaveLength(3);
  expect(ofKind(events, 'budget_exceeded')).toEqual([expect.objectContaining({ action: 'notify', per: 'run', used: { cost_usd: 1.2, tokens: 1100 } })]);
  expect((await okJson(target, 'GET', `/conversations/${id}`)).status).toBe('idle');
}, 30_000);

it('refuses a budget without a limit, and takes one by PUT /config', async () => {
  const target = await server();
  const refused = await requestJson(target, 'POST', '/conversations', { budget: { per: 'run' } });
  expect(refused.status).toBe(400);
  const { id } = await okJson(target, 'POST', '/conversations', {});
  const updated = await okJson(target, 'PUT', `/conversations/${id}/config`, { budget: { max_tokens: 5000, on_exceed: 'stop' } });
  expect(updated.budget).toEqual({ max_tokens: 5000, per: 'run', on_exceed: 'stop' });
}, 30_000);

it('pauses after a condensation summary reaches the budget, before the request it made room for', async () => {
  const step = (command: string) => ({ toolCalls: [{ name: 'bash', arguments: { command } }], usage: { prompt_tokens: 1000, completion_tokens: 100 } });
  // The system prompt and the tools take about 6,000 tokens; the first two results about 4,800 each: the third request would pass 12,000.
  const llm = await fake({
    script: [step('seq 1 4000; echo first-step'), step('seq 1 4000; echo second-step'), step('echo third-step'), { text: 'Done.' }],
    summarizer: () => ({ text: 'The summary.', usage: { prompt_tokens: 1000, completion_tokens: 100 } }),
  });
  const target = await server();
  const { id } = await okJson(target, 'POST', '/conversations', {
    llm: { model: 'fake-model', base_url: llm.url, api_key: 'k' },
    condenser: { max_tokens: 12_000, keep_first: 1, keep_last: 2 },
    budget: { max_tokens: 3000, per: 'run', on_exceed: 'pause' },
  });
  const events = await runToEnd(target, id, 'Work.');
  // 2,200 tokens when the third turn began; its summary brought them to 3,300: its request is never made.
  expect(llm.summaryRequests).toHaveLength(1);
  expect(llm.requests).toHaveLength(3);
  const [condensation] = ofKind(events, 'condensation');
  const [breach] = ofKind(events, 'budget_exceeded');
  expect(ofKind(events, 'budget_exceeded')).toHaveLength(1);
  expect(breach).toMatchObject({ action: 'pause', used: { cost_usd: 0, tokens: 3300 } });
  expect(condensation.seq).toBeLessThan(breach.seq);
  expect((await okJson(target, 'GET', `/conversations/${id}/runs`)).items.at(-1)).toMatchObject({ status: 'paused', outcome: 'budget_exceeded' });
}, 30_000);
