import { afterEach, describe, expect, it } from 'vitest';
import type { FakeTurn } from '../fake-llm/fake-llm-server.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { expectError } from '../support/expect-error.js';

let harness: AgentHarness;
afterEach(async () => harness?.close());

const bash = (command: string, promptTokens = 200): FakeTurn => ({ toolCalls: [{ name: 'bash', arguments: { command } }], usage: { prompt_tokens: promptTokens, completion_tokens: 10 } });
/** The commands of the bash calls in a request's messages (a summary may quote them; these are the calls themselves). */
const commandsIn = (messages: any[] | undefined) => (messages ?? []).flatMap((message) => (message.tool_calls ?? []).map((call: any) => JSON.parse(call.function.arguments).command));
/** The requests of the agent itself (not the condensation requests), in order. */
const agentRequests = () => harness.llm.requests.filter((request) => !harness.llm.summaryRequests.includes(request));

async function waitForEvent(id: string, kind: string, timeoutMs = 15_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = (await harness.events(id)).find((event) => event.kind === kind);
    if (found) return found;
    if (Date.now() > deadline) throw new Error(`no ${kind} event`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('condensation', () => {
  it('when the next request would pass condenser.max_tokens the middle of the history is summarized first; the request carries the summary, the log keeps everything', async () => {
    // The system prompt and the tools take about 6,000 tokens; the first two results about 4,800 each: the third request would pass 12,000.
    harness = await startAgentHarness([bash('seq 1 4000; echo first-step'), bash('seq 1 4000; echo second-step'), bash('echo third-step'), { text: 'all done' }], { fake: { summarizer: true } });
    const id = await harness.createConversation({ condenser: { max_tokens: 12_000, keep_first: 1, keep_last: 2 }, initial_message: 'run three steps' });
    await harness.waitForStatus(id, ['idle']);
    const events = await harness.events(id);
    const condensation = events.find((event) => event.kind === 'condensation');
    const actions = events.filter((event) => event.kind === 'action');
    const observations = events.filter((event) => event.kind === 'observation');
    // Forgotten: the first two calls and their results; kept: the task and the third call with its result.
    expect(condensation).toMatchObject({ source: 'system', trigger: 'auto', forgotten_from_seq: actions[0].seq, forgotten_to_seq: observations[1].seq });
    // Estimated before the request was sent: it never went to the provider over the threshold.
    expect(condensation.tokens_before).toBeGreaterThan(12_000);
    expect(condensation.tokens_after).toBeGreaterThan(0);
    expect(condensation.tokens_after).toBeLessThan(condensation.tokens_before - 2 * 2000);
    for (const request of agentRequests()) expect(JSON.stringify([request.body.messages, request.body.tools]).length / 4).toBeLessThan(12_000 * 1.2);
    // What the fake writes: the event range it was given, and the first words of each message.
    expect(condensation.summary).toBe(`SUMMARY of events #${actions[0].seq}–#${observations[1].seq}: → calls \`bash\` {"command":"seq 1 4000; e | 1 | → calls \`bash\` {"command":"seq 1 4000; e | 1`);
    expect(harness.llm.summaryRequests).toHaveLength(1);
    const summarized = JSON.stringify(harness.llm.summaryRequests[0]!.body.messages);
    expect(summarized).toContain('echo first-step');
    expect(summarized).toContain('3999\\n4000\\nsecond-step');
    expect(summarized).not.toContain('echo third-step');
    // The summary request offers no tools; the usage of the summary is counted.
    expect(harness.llm.summaryRequests[0]!.body.tools).toBeUndefined();
    expect(events.filter((event) => event.kind === 'usage')).toHaveLength(5);

    const last = agentRequests().at(-1)!.body.messages as any[];
    expect(last.map((message) => message.role)).toEqual(['system', 'user', 'user', 'assistant', 'tool']);
    expect(last[1].content).toBe('run three steps');
    expect(last[2].content).toContain(condensation.summary);
    expect(last[3].tool_calls[0].function.arguments).toContain('echo third-step');
    expect(commandsIn(last)).toEqual(['echo third-step']);
    // The log keeps every event.
    expect(actions).toHaveLength(3);
    expect(harness.llm.violations).toEqual([]);
  });

  it('POST /condense condenses an idle conversation now (with instructions); 409 when there is nothing to condense', async () => {
    harness = await startAgentHarness([bash('echo one'), bash('echo two'), bash('echo three'), { text: 'done' }, { text: 'next answer' }], { fake: { summarizer: true } });
    const fresh = await harness.createConversation();
    expectError(await harness.post(`/conversations/${fresh}/condense`, {}), { status: 409, error: 'nothing_to_condense', message: /^Nothing to condense/ });
    // Automatic condensation off: POST /condense still condenses.
    const id = await harness.createConversation({ condenser: null, initial_message: 'count to three' });
    await harness.waitForStatus(id, ['idle']);
    expect((await harness.get(`/conversations/${id}`)).body.condenser).toBeNull();
    expectError(await harness.post(`/conversations/${id}/condense`), { status: 409, error: 'nothing_to_condense', message: /^Nothing to condense/ });
    await fetch(`${harness.server.url}/conversations/${id}/config`, { method: 'PUT', headers: { ...harness.server.auth, 'content-type': 'application/json' }, body: JSON.stringify({ condenser: { keep_last: 2 } }) });

    const accepted = await harness.post(`/conversations/${id}/condense`, { instructions: 'Keep the word PINEAPPLE.' });
    expect(accepted.status).toBe(202);
    expect(accepted.body.run_id).toBeNull();
    const condensation = await waitForEvent(id, 'condensation');
    expect(condensation).toMatchObject({ trigger: 'manual', run_id: null, forgotten_from_seq: accepted.body.forgotten_from_seq, forgotten_to_seq: accepted.body.forgotten_to_seq });
    expect(JSON.stringify(harness.llm.summaryRequests[0]!.body.messages)).toContain('Keep the word PINEAPPLE.');
    // Nothing left worth condensing right after.
    expectError(await harness.post(`/conversations/${id}/condense`), { status: 409, error: 'nothing_to_condense', message: /^Nothing to condense/ });

    await harness.post(`/conversations/${id}/messages`, { content: 'and now?' });
    await harness.waitForStatus(id, ['idle']);
    const last = agentRequests().at(-1)!.body.messages as any[];
    expect(last.some((message) => typeof message.content === 'string' && message.content.includes(condensation.summary))).toBe(true);
    expect(commandsIn(last)).toEqual(['echo three']);
    expect(last.at(-1)).toEqual({ role: 'user', content: 'and now?' });
    expect(harness.llm.violations).toEqual([]);
    // The summary's tokens are in the conversation's usage.
    expect((await harness.get(`/conversations/${id}`)).body.usage.prompt_tokens).toBeGreaterThan(4 * 200);
  });

  it('POST /condense during a run is done before its next LLM request', async () => {
    harness = await startAgentHarness([bash('echo one'), bash('echo two'), bash('echo three'), bash('sleep 1; echo slow'), { text: 'done' }], { fake: { summarizer: true } });
    const id = await harness.createConversation({ initial_message: 'go', condenser: { keep_last: 2 } });
    const deadline = Date.now() + 15_000;
    while (!(await harness.events(id)).some((event) => event.kind === 'action' && event.arguments.command === 'sleep 1; echo slow')) {
      if (Date.now() > deadline) throw new Error('the slow call never came');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const accepted = await harness.post(`/conversations/${id}/condense`);
    expect(accepted.status).toBe(202);
    const conversation = await harness.get(`/conversations/${id}`);
    expect(accepted.body.run_id).toBe(conversation.body.current_run_id);
    expectError(await harness.post(`/conversations/${id}/condense`), { status: 409, error: 'condensation_in_progress', message: /already under way/ });
    await harness.waitForStatus(id, ['idle']);
    const events = await harness.events(id);
    const condensation = events.find((event) => event.kind === 'condensation');
    expect(condensation).toMatchObject({ trigger: 'manual', run_id: accepted.body.run_id });
    const slowResult = events.find((event) => event.kind === 'observation' && event.content.includes('slow'));
    expect(condensation.seq).toBeGreaterThan(slowResult.seq);
    expect(commandsIn(agentRequests().at(-1)!.body.messages)).toEqual(['sleep 1; echo slow']);
    expect(harness.llm.violations).toEqual([]);
  });

  it('a context-length refusal condenses the history and retries the turn once', async () => {
    const tooLong = { status: 400, body: { error: { message: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.", type: 'invalid_request_error', code: 'context_length_exceeded' } } };
    harness = await startAgentHarness([bash('echo one'), bash('echo two'), bash('echo three'), tooLong, { text: 'fits now' }], { fake: { summarizer: true } });
    const id = await harness.createConversation({ condenser: { keep_last: 2 }, initial_message: 'go' });
    const done = await harness.waitForStatus(id, ['idle', 'error']);
    expect(done.status).toBe('idle');
    const events = await harness.events(id);
    expect(events.some((event) => event.kind === 'agent_error')).toBe(false);
    expect(events.find((event) => event.kind === 'condensation')).toMatchObject({ trigger: 'context_exceeded' });
    expect(events.find((event) => event.kind === 'message' && event.source === 'agent')).toMatchObject({ content: 'fits now' });
    const requests = agentRequests();
    expect(commandsIn(requests.at(-2)!.body.messages)).toEqual(['echo one', 'echo two', 'echo three']);
    expect(commandsIn(requests.at(-1)!.body.messages)).toEqual(['echo three']);
    expect(harness.llm.violations).toEqual([]);
  });

  it('a PreCompact hook that blocks stops the condensation, recorded as a hook event; a refused prompt then ends the run in agent_error', async () => {
    const tooLong = { status: 400, body: { error: { message: 'prompt is too long', type: 'invalid_request_error', code: 'context_length_exceeded' } } };
    harness = await startAgentHarness([bash('echo one'), bash('echo two'), bash('echo three'), { text: 'done' }, tooLong], { fake: { summarizer: true } });
    const hooks = { PreCompact: [{ hooks: [{ type: 'command', command: 'cat > precompact-input.json; echo "not now" >&2; exit 2' }] }] };
    const id = await harness.createConversation({ hooks, condenser: { keep_last: 2 }, initial_message: 'go' });
    await harness.waitForStatus(id, ['idle']);
    expect((await harness.post(`/conversations/${id}/condense`)).status).toBe(202);
    const hook = await waitForEvent(id, 'hook');
    expect(hook).toMatchObject({ hook_point: 'PreCompact', decision: 'block', reason: 'not now' });
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    const input = JSON.parse(await import('node:fs').then((fs) => fs.readFileSync(`${workdir}/precompact-input.json`, 'utf8')));
    expect(input).toMatchObject({ hook_event_name: 'PreCompact', trigger: 'manual', session_id: id });

    await harness.post(`/conversations/${id}/messages`, { content: 'more' });
    const failed = await harness.waitForStatus(id, ['error', 'idle']);
    expect(failed.status).toBe('error');
    const events = await harness.events(id);
    expect(events.some((event) => event.kind === 'condensation')).toBe(false);
    expect(events.filter((event) => event.kind === 'hook' && event.decision === 'block')).toHaveLength(2);
    const error = events.find((event) => event.kind === 'agent_error');
    expect(error).toMatchObject({ error: 'llm_context_exceeded' });
    expect(error.message).toContain('Condensing the history was blocked by a PreCompact hook: not now');
    expect(harness.llm.summaryRequests).toHaveLength(0);
  });

  it('condenser settings are validated, shown, and changed with PUT /config', async () => {
    harness = await startAgentHarness([]);
    // Without an LLM there is nobody to write the summary.
    const bare = await harness.post('/conversations', {});
    expect(bare.body.llm).toBeNull();
    expectError(await harness.post(`/conversations/${bare.body.id}/condense`), { status: 422, error: 'llm_not_configured', message: /no LLM to write the summary/ });
    const id = await harness.createConversation();
    expect((await harness.get(`/conversations/${id}`)).body).toMatchObject({ condenser: { max_tokens: null, keep_first: 1, keep_last: 10 }, multitask_strategy: 'enqueue' });
    const bad = await harness.post('/conversations', { condenser: { max_tokens: 5, keep_everything: true } });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe('validation_error');
    const put = await fetch(`${harness.server.url}/conversations/${id}/config`, {
      method: 'PUT',
      headers: { ...harness.server.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ condenser: { max_tokens: 50_000, keep_last: 4 }, multitask_strategy: 'interrupt' }),
    });
    expect(put.status).toBe(200);
    expect(await put.json()).toMatchObject({ condenser: { max_tokens: 50_000, keep_first: 1, keep_last: 4 }, multitask_strategy: 'interrupt' });
  });
});
