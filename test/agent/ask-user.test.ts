import { afterEach, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm, type RecordedRequest } from '../fake-llm/fake-llm-server.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { spawnServer, tempDir, TEST_KEY, type SpawnedServer } from '../support/agentd.js';
import { expectError } from '../support/expect-error.js';
import { WebhookReceiver } from '../support/webhook-receiver.js';

let harness: AgentHarness | undefined;
let receiver: WebhookReceiver | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
  await receiver?.close();
  receiver = undefined;
});

const ASK = { toolCalls: [{ id: 'call_ask', name: 'ask_user', arguments: { question: 'Which branch?', options: ['main', 'dev'] } }] };

/** The result the model read for a tool call, in the request it was sent with. */
function toolResult(request: RecordedRequest, callId: string): unknown {
  return request.body.messages?.find((message) => message.role === 'tool' && message.tool_call_id === callId)?.content;
}

describe('ask_user', () => {
  it('records a question, waits with status waiting_for_input, and POST /answer becomes the call result', async () => {
    harness = await startAgentHarness([ASK, { text: 'using dev' }]);
    const id = await harness.createConversation({ initial_message: 'deploy it' });
    const waiting = await harness.waitForStatus(id, ['waiting_for_input']);
    expect(waiting.current_run_id).toEqual(expect.any(String));
    const question = (await harness.events(id)).find((event) => event.kind === 'question');
    expect(question).toMatchObject({ source: 'agent', tool_call_id: 'call_ask', question: 'Which branch?', options: ['main', 'dev'], run_id: waiting.current_run_id });
    // The list filter knows the new status.
    const listed = await harness.get('/conversations?status=waiting_for_input');
    expect(listed.body.items.map((item: { id: string }) => item.id)).toEqual([id]);
    // A message during the wait is not a second run, and /run is refused.
    expectError(await harness.post(`/conversations/${id}/run`), { status: 409, error: 'run_in_progress', message: /^A run is already in progress/ });

    expectError(await harness.post(`/conversations/${id}/answer`, { tool_call_id: 'call_other', content: 'dev' }), { status: 409, error: 'question_mismatch', message: /^The open question is tool call call_ask, not call_other\./ });
    expectError(await harness.post(`/conversations/${id}/answer`, { content: '' }), { status: 400, error: 'validation_error', message: /./ });
    expectError(await harness.post(`/conversations/00000000-0000-4000-8000-000000000000/answer`, { content: 'x' }), { status: 404, error: 'conversation_not_found', message: /./ });

    const answered = await harness.post(`/conversations/${id}/answer`, { tool_call_id: 'call_ask', content: 'dev' });
    expect(answered).toEqual({ status: 202, body: { tool_call_id: 'call_ask', run_id: waiting.current_run_id } });
    expectError(await harness.post(`/conversations/${id}/answer`, { content: 'main' }), { status: 409, error: 'no_open_question', message: /^No question is waiting for an answer in this conversation\.$/ });
    await harness.waitForStatus(id, ['idle']);

    expect(toolResult(harness.llm.requests[1]!, 'call_ask')).toBe('dev');
    expect(harness.llm.violations).toEqual([]);
    const events = await harness.events(id);
    expect(events.find((event) => event.kind === 'observation')).toMatchObject({ tool_name: 'ask_user', content: 'dev', is_error: false, data: { answered_via: 'answer' } });
    const statuses = events.filter((event) => event.kind === 'state_update').map((event) => event.status);
    expect(statuses).toEqual(['running', 'waiting_for_input', 'running', 'idle']);
    const runs = await harness.get(`/conversations/${id}/runs`);
    expect(runs.body.items).toHaveLength(1);
    expect(runs.body.items[0]).toMatchObject({ status: 'completed' });
  });

  it('the next plain message answers the question; the model reads it once, as the call result', async () => {
    harness = await startAgentHarness([ASK, { text: 'main it is' }]);
    const id = await harness.createConversation({ initial_message: 'deploy it' });
    const waiting = await harness.waitForStatus(id, ['waiting_for_input']);
    const sent = await harness.post(`/conversations/${id}/messages`, { content: 'main, please' });
    expect(sent.status).toBe(202);
    expect(sent.body).toMatchObject({ run_id: waiting.current_run_id, event: { kind: 'message', content: 'main, please', answers_tool_call_id: 'call_ask' } });
    await harness.waitForStatus(id, ['idle']);
    const request = harness.llm.requests[1]!;
    expect(toolResult(request, 'call_ask')).toBe('main, please');
    expect(request.body.messages!.filter((message) => JSON.stringify(message.content ?? '').includes('main, please'))).toHaveLength(1);
    expect(harness.llm.violations).toEqual([]);
  });

  it('a pause while waiting ends the wait: the call is closed as interrupted and /answer finds no question', async () => {
    harness = await startAgentHarness([ASK, { text: 'resumed' }]);
    const id = await harness.createConversation({ initial_message: 'deploy it' });
    await harness.waitForStatus(id, ['waiting_for_input']);
    const paused = await harness.post(`/conversations/${id}/pause`);
    expect(paused.body.status).toBe('paused');
    const events = await harness.events(id);
    expect(events.find((event) => event.kind === 'observation')).toMatchObject({ tool_call_id: 'call_ask', is_error: true, data: { interrupted: true } });
    expectError(await harness.post(`/conversations/${id}/answer`, { content: 'dev' }), { status: 409, error: 'no_open_question', message: /^No question is waiting/ });
    // A message now starts a new run, as after any pause.
    const sent = await harness.post(`/conversations/${id}/messages`, { content: 'use dev' });
    expect(sent.body.event.answers_tool_call_id).toBeUndefined();
    await harness.waitForStatus(id, ['idle']);
    expect(harness.llm.violations).toEqual([]);
  });

  it('a webhook receiver that sees the question answers it with POST /answer', async () => {
    harness = await startAgentHarness([ASK, { text: 'deployed dev' }]);
    const server = harness.server;
    const answers: Promise<Response>[] = [];
    receiver = await WebhookReceiver.start({
      reply: (_n, request) => {
        const { conversation_id, event } = request.json;
        if (event.kind === 'question') {
          // Answered from the receiver, as a bot would: the option it prefers.
          answers.push(fetch(`${server.url}/conversations/${conversation_id}/answer`, { method: 'POST', headers: { ...server.auth, 'content-type': 'application/json' }, body: JSON.stringify({ tool_call_id: event.tool_call_id, content: (event.options as string[])[1] }) }));
        }
        return 200;
      },
    });
    const id = await harness.createConversation();
    const callback = await harness.post(`/conversations/${id}/callbacks`, { url: receiver.url, events: ['question'] });
    expect(callback.status).toBe(201);
    await harness.post(`/conversations/${id}/messages`, { content: 'deploy it' });
    await receiver.waitFor(() => answers.length === 1, 'the question delivered');
    expect((await answers[0]!).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    expect(receiver.delivered.map((request) => request.json.event.kind)).toEqual(['question']);
    expect(toolResult(harness.llm.requests[1]!, 'call_ask')).toBe('dev');
    const events = await harness.events(id);
    expect(events.find((event) => event.kind === 'message' && event.source === 'agent')).toMatchObject({ content: 'deployed dev' });
  });
});

describe('ask_user across a restart', () => {
  let llm: FakeLlm | undefined;
  let server: SpawnedServer | undefined;
  afterEach(async () => {
    server?.child.kill('SIGKILL');
    await llm?.close();
  });

  it('a server killed while waiting comes back paused with the question closed; a message goes on', { timeout: 60_000 }, async () => {
    llm = await startFakeLlm([ASK, { text: 'went on' }]);
    const dataDir = tempDir();
    server = await spawnServer({ dataDir });
    const headers = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };
    const api = async (path: string, body?: unknown) => {
      const response = await fetch(`${server!.url}${path}`, { method: body === undefined ? 'GET' : 'POST', headers, ...(body !== undefined && { body: JSON.stringify(body) }) });
      return { status: response.status, body: (await response.json()) as any };
    };
    const created = await api('/conversations', { llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, initial_message: 'deploy it' });
    const id = created.body.id as string;
    const deadline = Date.now() + 20_000;
    while ((await api(`/conversations/${id}`)).body.status !== 'waiting_for_input') {
      if (Date.now() > deadline) throw new Error('never waited for input');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    server.child.kill('SIGKILL');
    await server.exited;
    server = await spawnServer({ dataDir });

    const conversation = (await api(`/conversations/${id}`)).body;
    expect(conversation).toMatchObject({ status: 'paused', current_run_id: null });
    const events = (await api(`/conversations/${id}/events?limit=1000`)).body.items;
    expect(events.find((event: any) => event.kind === 'observation')).toMatchObject({ tool_call_id: 'call_ask', is_error: true, data: { interrupted: true } });
    expect((await api(`/conversations/${id}/runs`)).body.items[0]).toMatchObject({ status: 'paused', outcome: 'server_restart' });
    expect((await api(`/conversations/${id}/answer`, { content: 'dev' })).status).toBe(409);

    expect((await api(`/conversations/${id}/messages`, { content: 'dev' })).status).toBe(202);
    const idleBy = Date.now() + 20_000;
    while ((await api(`/conversations/${id}`)).body.status !== 'idle') {
      if (Date.now() > idleBy) throw new Error('never went idle');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(llm.violations).toEqual([]);
  });
});
