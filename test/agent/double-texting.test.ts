import { afterEach, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { connectSse } from '../support/sse-client.js';
import { expectError } from '../support/expect-error.js';
import { processAlive, waitForProcess } from '../support/processes.js';
import { requestJson } from '../support/json-api.js';

let harness: AgentHarness;
afterEach(async () => harness?.close());

/** A command no other test runs, so that its process can be found in /proc. */
const slowCommand = (tag: string) => `sleep 3${Math.floor(Math.random() * 9)}.${Date.now() % 1000}; echo ${tag}`;
const marker = (command: string) => command.split(';')[0]!;

async function put(id: string, body: unknown): Promise<void> {
  expect((await requestJson(harness.server, 'PUT', `/conversations/${id}/config`, body)).status).toBe(200);
}

describe('double-texting: multitask_strategy', () => {
  it('interrupt mid-tool: the running command is stopped, the calls left are not run, the LLM sees the new message next', async () => {
    const slow = slowCommand('never-printed');
    harness = await startAgentHarness([
      { toolCalls: [{ name: 'bash', arguments: { command: slow } }, { name: 'bash', arguments: { command: 'echo second > second.txt' } }] },
      { text: 'stopped, as you asked' },
    ]);
    const id = await harness.createConversation({ initial_message: 'run the slow thing' });
    await waitForProcess(marker(slow), 15_000);
    const sent = await harness.post(`/conversations/${id}/messages`, { content: 'stop, do something else', multitask_strategy: 'interrupt' });
    expect(sent.status).toBe(202);
    const runId = (await harness.get(`/conversations/${id}/runs`)).body.items[0].id;
    expect(sent.body).toMatchObject({ run_id: runId, event: { multitask_strategy: 'interrupt', content: 'stop, do something else' } });
    await harness.waitForStatus(id, ['idle']);
    expect(processAlive(marker(slow))).toBe(false);

    const events = await harness.events(id);
    const [first, second] = events.filter((event) => event.kind === 'observation');
    expect(first).toMatchObject({ tool_name: 'bash', is_error: false });
    expect(first.content).toContain('[Interrupted: the user sent a new message.]');
    expect(first.content).not.toContain('never-printed');
    expect(second).toMatchObject({ is_error: true, data: { error: 'interrupted' } });
    expect(second.content).toMatch(/^Not run: the user interrupted this turn/);
    const interrupt = events.find((event) => event.kind === 'interrupt');
    expect(interrupt).toMatchObject({ source: 'user', run_id: runId, message_seq: sent.body.event.seq, stopped: 'tool', tool_call_ids: [first.tool_call_id, second.tool_call_id] });
    expect((await harness.get(`/conversations/${id}/runs/${runId}`)).body.status).toBe('completed');
    const last = harness.llm.requests.at(-1)!.body.messages as any[];
    expect(last.slice(-3).map((message) => message.role)).toEqual(['tool', 'tool', 'user']);
    expect(last.at(-1).content).toBe('stop, do something else');
    expect(harness.llm.violations).toEqual([]);
  });

  it('interrupt mid-LLM-stream: the answer being streamed is dropped and the model answers again with the message in view', async () => {
    harness = await startAgentHarness([{ text: 'a long answer that streams slowly '.repeat(10), chunkDelayMs: 40 }, { text: 'the answer to the new question' }]);
    const id = await harness.createConversation();
    const stream = await connectSse(`${harness.server.url}/conversations/${id}/events/stream`, harness.server.auth);
    await harness.post(`/conversations/${id}/messages`, { content: 'first question' });
    await stream.waitFor((messages) => messages.some((message) => message.event === 'message_delta'));
    const sent = await harness.post(`/conversations/${id}/messages`, { content: 'never mind: second question', multitask_strategy: 'interrupt' });
    expect(sent.status).toBe(202);
    await stream.waitFor((messages) => messages.some((message) => message.event === 'state_update' && JSON.parse(message.data).status === 'idle'));
    stream.close();

    const events = await harness.events(id);
    expect(events.find((event) => event.kind === 'interrupt')).toMatchObject({ stopped: 'llm', message_seq: sent.body.event.seq, tool_call_ids: [] });
    const answers = events.filter((event) => event.kind === 'message' && event.source === 'agent');
    expect(answers.map((event) => event.content)).toEqual(['the answer to the new question']);
    expect(harness.llm.requests).toHaveLength(2);
    const second = harness.llm.requests[1]!.body.messages as any[];
    expect(second.slice(1)).toEqual([
      { role: 'user', content: 'first question' },
      { role: 'user', content: 'never mind: second question' },
    ]);
    expect(harness.llm.violations).toEqual([]);
  });

  it('rollback mid-tool: the run is canceled, its events leave the LLM history (not the log), a new run starts from the new message', async () => {
    const slow = slowCommand('task-a-done');
    harness = await startAgentHarness([{ text: 'earlier answer' }, { toolCalls: [{ name: 'bash', arguments: { command: slow } }] }, { text: 'doing task B' }]);
    const id = await harness.createConversation({ initial_message: 'hello' });
    await harness.waitForStatus(id, ['idle']);
    const taskA = await harness.post(`/conversations/${id}/messages`, { content: 'task A' });
    await waitForProcess(marker(slow), 15_000);
    const sent = await harness.post(`/conversations/${id}/messages`, { content: 'task B instead', multitask_strategy: 'rollback' });
    expect(sent.status).toBe(202);
    expect(sent.body.run_id).not.toBe(taskA.body.run_id);
    await harness.waitForStatus(id, ['idle']);
    expect(processAlive(marker(slow))).toBe(false);

    expect((await harness.get(`/conversations/${id}/runs/${taskA.body.run_id}`)).body.status).toBe('canceled');
    const events = await harness.events(id);
    const rollback = events.find((event) => event.kind === 'rollback');
    expect(rollback).toMatchObject({ source: 'user', run_id: taskA.body.run_id, forgotten_from_seq: taskA.body.event.seq });
    expect(rollback.forgotten_to_seq).toBe(rollback.seq - 1);
    expect(sent.body.event.seq).toBe(rollback.seq + 1);
    // The log keeps the canceled run: its call and the observation that closed it.
    expect(events.filter((event) => event.kind === 'action')).toHaveLength(1);
    const last = harness.llm.requests.at(-1)!.body.messages as any[];
    expect(last.slice(1)).toEqual([
      { role: 'user', content: 'hello' },
      { role: 'assistant', content: 'earlier answer' },
      { role: 'user', content: 'task B instead' },
    ]);
    expect(harness.llm.violations).toEqual([]);
  });

  it("reject: 409 during a run and the message is not recorded; the conversation's strategy is the default, a message's own wins", async () => {
    harness = await startAgentHarness([{ hang: true }, { text: 'took the queued message' }]);
    const id = await harness.createConversation({ multitask_strategy: 'reject' });
    expect((await harness.post(`/conversations/${id}/messages`, { content: 'start' })).status).toBe(202);
    const running = await harness.waitForStatus(id, ['running']);
    // The run's LLM request hangs (paused below; a pause before it leaves would leave the hang to the next run).
    await expect.poll(() => harness.llm.requests.length, { timeout: 15_000 }).toBe(1);
    expectError(await harness.post(`/conversations/${id}/messages`, { content: 'too soon' }), { status: 409, error: 'run_in_progress', message: /multitask_strategy is `reject`/ });
    const refused = await harness.post(`/conversations/${id}/messages`, { content: 'too soon' });
    expect(refused.body.details).toEqual({ run_id: running.current_run_id });
    expect((await harness.events(id)).some((event) => event.kind === 'message' && event.content === 'too soon')).toBe(false);

    const queued = await harness.post(`/conversations/${id}/messages`, { content: 'queue me', multitask_strategy: 'enqueue' });
    expect(queued.status).toBe(202);
    expect(queued.body).toMatchObject({ run_id: running.current_run_id, event: { multitask_strategy: 'enqueue' } });
    // Between runs every strategy simply starts a run.
    await put(id, { multitask_strategy: 'rollback' });
    await harness.post(`/conversations/${id}/pause`);
    const after = await harness.post(`/conversations/${id}/messages`, { content: 'new run' });
    expect(after.status).toBe(202);
    expect(after.body.event.multitask_strategy).toBeUndefined();
    await harness.waitForStatus(id, ['idle']);
    expect(JSON.stringify(harness.llm.requests.at(-1)!.body.messages)).toContain('queue me');
  });
});
