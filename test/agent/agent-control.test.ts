import { afterEach, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { connectSse } from '../support/sse-client.js';
import { expectError } from '../support/expect-error.js';

let harness: AgentHarness;
afterEach(async () => harness?.close());

describe('run control', () => {
  it('confirmation mode: actions wait, approve runs them, reject is seen by the LLM', async () => {
    harness = await startAgentHarness([
      { toolCalls: [{ name: 'file_editor', arguments: { command: 'create', path: 'a.txt', file_text: 'A' } }] },
      { toolCalls: [{ name: 'file_editor', arguments: { command: 'create', path: 'b.txt', file_text: 'B' } }] },
      { text: 'ok, not creating b' },
    ]);
    const id = await harness.createConversation({ confirmation_mode: true, initial_message: 'make files' });
    let conversation = await harness.waitForStatus(id, ['waiting_for_confirmation']);
    expect(conversation.pending_actions).toHaveLength(1);
    expect(conversation.pending_actions[0]).toMatchObject({ tool_name: 'file_editor', arguments: { path: 'a.txt' } });
    expectError(await harness.post(`/conversations/${id}/run`), { status: 409, error: 'confirmation_pending', message: /^Actions are waiting for confirmation: approve or/ });

    const approved = await harness.post(`/conversations/${id}/approve`);
    expect(approved.status).toBe(202);
    conversation = await harness.waitForStatus(id, ['waiting_for_confirmation']);
    expect(conversation.pending_actions[0].arguments.path).toBe('b.txt');

    const rejected = await harness.post(`/conversations/${id}/reject`, { reason: 'not b' });
    expect(rejected.status).toBe(202);
    conversation = await harness.waitForStatus(id, ['idle']);
    const events = await harness.events(id);
    expect(events.filter((event) => event.kind === 'observation')).toHaveLength(1);
    expect(events.find((event) => event.kind === 'rejection')).toMatchObject({ tool_name: 'file_editor', reason: 'not b' });
    const last = harness.llm.requests.at(-1)!.body as any;
    const toolMessages = last.messages.filter((message: any) => message.role === 'tool');
    expect(toolMessages.at(-1).content).toBe('The user rejected this action: not b. It was not executed.');
    expect(harness.llm.violations).toEqual([]);
    expectError(await harness.post(`/conversations/${id}/approve`), { status: 409, error: 'no_pending_actions', message: /^No actions are waiting for confirmation\./ });
  });

  it('pause aborts a hanging LLM request within seconds; run continues after', async () => {
    harness = await startAgentHarness([{ hang: true }, { text: 'resumed' }]);
    const id = await harness.createConversation({ initial_message: 'go' });
    await harness.waitForStatus(id, ['running']);
    // Paused while the LLM hangs on the first request (a pause before it leaves would leave the hang to the next run).
    await expect.poll(() => harness.llm.requests.length, { timeout: 15_000 }).toBe(1);
    const started = Date.now();
    const paused = await harness.post(`/conversations/${id}/pause`);
    expect(paused.status).toBe(200);
    expect(paused.body.status).toBe('paused');
    expect(Date.now() - started).toBeLessThan(2500);
    const runs = await harness.get(`/conversations/${id}/runs`);
    expect(runs.body.items[0]).toMatchObject({ status: 'paused' });

    const resumed = await harness.post(`/conversations/${id}/run`);
    expect(resumed.status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    expect((await harness.get(`/conversations/${id}/runs/${resumed.body.run_id}`)).body.status).toBe('completed');
  });

  it('cancel a run with DELETE /runs/{id}', async () => {
    harness = await startAgentHarness([{ hang: true }]);
    const id = await harness.createConversation({ initial_message: 'go' });
    const conversation = await harness.waitForStatus(id, ['running']);
    const canceled = await fetch(`${harness.server.url}/conversations/${id}/runs/${conversation.current_run_id}`, { method: 'DELETE', headers: harness.server.auth });
    expect(canceled.status).toBe(200);
    expect(((await canceled.json()) as { status: string }).status).toBe('canceled');
    expect((await harness.get(`/conversations/${id}`)).body.status).toBe('paused');
  });

  it('retries LLM 500s and 429s; after retries run out: agent_error and status error', async () => {
    harness = await startAgentHarness([{ status: 500 }, { status: 429 }, { text: 'fine' }, { status: 500 }, { status: 500 }, { status: 500 }, { status: 500 }, { status: 500 }]);
    const id = await harness.createConversation({ initial_message: 'one' });
    expect((await harness.waitForStatus(id, ['idle', 'error'])).status).toBe('idle');
    await harness.post(`/conversations/${id}/messages`, { content: 'two' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    const failed = await harness.waitForStatus(id, ['error', 'idle']);
    expect(failed.status).toBe('error');
    const events = await harness.events(id);
    expect(events.find((event) => event.kind === 'agent_error')).toMatchObject({ error: 'llm_server_error' });
    expect(JSON.stringify(events)).not.toContain('sk-test-llm-key');
  });

  it('streams message_delta over SSE (never persisted)', async () => {
    harness = await startAgentHarness([{ text: 'streaming a fairly long answer in pieces', chunkDelayMs: 5 }]);
    const id = await harness.createConversation();
    const stream = await connectSse(`${harness.server.url}/conversations/${id}/events/stream`, harness.server.auth);
    await harness.post(`/conversations/${id}/messages`, { content: 'talk' });
    await stream.waitFor((messages) => messages.some((message) => message.event === 'state_update' && JSON.parse(message.data).status === 'idle'));
    stream.close();
    const deltas = stream.messages.filter((message) => message.event === 'message_delta');
    expect(deltas.length).toBeGreaterThan(3);
    expect(deltas.every((message) => message.id === undefined)).toBe(true);
    expect(deltas.map((message) => JSON.parse(message.data).content_delta).join('')).toBe('streaming a fairly long answer in pieces');
    expect((await harness.events(id)).some((event) => event.kind === 'message_delta')).toBe(false);
  });

  it('max_iterations_per_run ends the run with a state_update saying so', async () => {
    const call = { toolCalls: [{ name: 'glob', arguments: { pattern: '*.none' } }] };
    harness = await startAgentHarness([call, { toolCalls: [{ name: 'task_tracker', arguments: { command: 'view' } }] }, call, call]);
    const id = await harness.createConversation({ max_iterations_per_run: 2, initial_message: 'loop' });
    const done = await harness.waitForStatus(id, ['paused', 'idle', 'error']);
    expect(done.status).toBe('paused');
    const last = (await harness.events(id)).at(-1);
    expect(last).toMatchObject({ kind: 'state_update', status: 'paused' });
    expect(last.reason).toContain('max_iterations_per_run');
  });

  it('the same action with the same observation 4 times in a row is nudged, then stuck when it goes on', async () => {
    const call = { toolCalls: [{ name: 'glob', arguments: { pattern: '*.none' } }] };
    harness = await startAgentHarness(Array.from({ length: 10 }, () => call));
    const id = await harness.createConversation({ initial_message: 'loop' });
    const done = await harness.waitForStatus(id, ['stuck', 'idle', 'error']);
    expect(done.status).toBe('stuck');
    expect(harness.llm.requests).toHaveLength(8);
    const fifth = harness.llm.requests[4]!.body as any;
    expect(fifth.messages.at(-1)).toMatchObject({ role: 'user' });
    expect(fifth.messages.at(-1).content).toContain('same call with the same result 4 times');
  });

  it('a message sent during a run is seen by the LLM at its next turn', async () => {
    harness = await startAgentHarness([{ text: 'first answer', delayMs: 400 }, { text: 'second answer' }]);
    const id = await harness.createConversation({ initial_message: 'first' });
    await harness.waitForStatus(id, ['running']);
    // Sent while the LLM is answering the first turn (not before its request: then both messages are in it).
    await expect.poll(() => harness!.llm.requests.length, { timeout: 15_000 }).toBe(1);
    const queued = await harness.post(`/conversations/${id}/messages`, { content: 'also this' });
    expect(queued.status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    expect(harness.llm.requests).toHaveLength(2);
    const second = harness.llm.requests[1]!.body as any;
    expect(second.messages.at(-1)).toMatchObject({ role: 'user', content: 'also this' });
    expect(queued.body.run_id).toBe((await harness.get(`/conversations/${id}/runs`)).body.items[0].id);
  });
});
