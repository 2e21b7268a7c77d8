import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { startServer, tempDir, TEST_KEY, type TestServer } from '../support/agentd.js';
import { okJson } from '../support/json-api.js';
import { waitForProcess } from '../support/processes.js';
import { AcpEditor, agentText, expectGolden, normalise, updates, type TranscriptEntry } from './acp-editor.js';

/**
 * `agentd acp` as a client of a running server (AGENTD_URL, AGENTD_KEY): permissions asked in the
 * editor and remembered in the conversation, cancel, and sessions loaded by another editor
 * process (the history replayed, a permission left unanswered asked again).
 */
let base: string;
let llm: FakeLlm;
let server: TestServer;
let env: Record<string, string>;
const editors: AcpEditor[] = [];

beforeAll(async () => {
  base = tempDir('agentd-acp-remote-');
  llm = await startFakeLlm();
  server = await startServer({ env: { AGENTD_LLM_MODEL: 'fake-model', AGENTD_LLM_BASE_URL: llm.url, AGENTD_LLM_API_KEY: 'sk-fake' } });
  env = { AGENTD_URL: server.url, AGENTD_KEY: TEST_KEY, HOME: base };
});

afterEach(async () => {
  await Promise.all(editors.splice(0).map((editor) => editor.close()));
});

afterAll(async () => {
  await server?.close();
  await llm?.close();
});

function editorFor(cwd: string, options: ConstructorParameters<typeof AcpEditor>[0] = {}): AcpEditor {
  const editor = new AcpEditor({ env, cwd, ...options });
  editors.push(editor);
  return editor;
}

function project(name: string): string {
  const dir = path.join(base, name);
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

function conversation(id: string): Promise<any> {
  return okJson(server, 'GET', `/conversations/${id}`);
}

const USAGE = { prompt_tokens: 200, completion_tokens: 40 };
const isUpdate = (kind: string) => (entry: TranscriptEntry) => 'update' in entry && entry.update.sessionUpdate === kind;

describe('agentd acp against a running server', () => {
  it('asks before a command; "always allow" adds the rule to the conversation and the same command does not ask again', { timeout: 60_000 }, async () => {
    const cwd = project('permission');
    const editor = editorFor(cwd, { permissions: ['allow_always'] });
    await editor.initialize();
    const session = await editor.newSession(cwd);
    llm.setScript([
      { toolCalls: [{ id: 'call_echo', name: 'bash', arguments: { command: 'echo allowed > allowed.txt' } }], usage: USAGE },
      { text: 'Wrote allowed.txt.', usage: USAGE },
    ]);
    const first = await editor.call('session/prompt', { sessionId: session.sessionId, prompt: [{ type: 'text', text: 'Write the file' }] });
    expect(first.stopReason).toBe('end_turn');
    expect(fs.readFileSync(path.join(cwd, 'allowed.txt'), 'utf8')).toBe('allowed\n');
    expect((await conversation(session.sessionId)).permissions.allow).toContain('bash(echo allowed)');
    expectGolden('permission-round-trip', normalise(editor.transcript, { [cwd]: '<workdir>' }));

    llm.setScript([
      { toolCalls: [{ id: 'call_again', name: 'bash', arguments: { command: 'echo allowed > allowed.txt' } }], usage: USAGE },
      { text: 'Again.', usage: USAGE },
    ]);
    const second = await editor.call('session/prompt', { sessionId: session.sessionId, prompt: [{ type: 'text', text: 'Once more' }] });
    expect(second.stopReason).toBe('end_turn');
    expect(editor.transcript.filter((entry) => 'permission' in entry)).toHaveLength(1);
  });

  it('cancel pauses the run: the running command is stopped and its result shown before the prompt answers cancelled', { timeout: 60_000 }, async () => {
    const cwd = project('cancel');
    const editor = editorFor(cwd);
    await editor.initialize();
    const session = await editor.newSession(cwd);
    await editor.call('session/set_mode', { sessionId: session.sessionId, modeId: 'bypass' });
    llm.setScript([{ toolCalls: [{ id: 'call_sleep', name: 'bash', arguments: { command: 'sleep 31.7' } }], usage: USAGE }]);
    const prompt = editor.call('session/prompt', { sessionId: session.sessionId, prompt: [{ type: 'text', text: 'Wait a long time' }] });
    await editor.until(isUpdate('tool_call'));
    // Cancelled while the command runs (the call is announced before it starts).
    await waitForProcess('sleep 31.7');
    await editor.agent.notify('session/cancel', { sessionId: session.sessionId });
    expect((await prompt).stopReason).toBe('cancelled');
    expect((await conversation(session.sessionId)).status).toBe('paused');
    const stopped = updates(editor.transcript).at(-1)!;
    expect(stopped).toMatchObject({ sessionUpdate: 'tool_call_update', toolCallId: 'call_sleep' });
    expect(JSON.stringify(stopped)).toContain('Interrupted');
    expectGolden('cancel', normalise(editor.transcript, { [cwd]: '<workdir>' }));
  });

  it('session/load in another editor replays the finished session, the same updates the first editor saw', { timeout: 60_000 }, async () => {
    const cwd = project('load');
    const first = editorFor(cwd);
    await first.initialize();
    const session = await first.newSession(cwd);
    await first.call('session/set_mode', { sessionId: session.sessionId, modeId: 'bypass' });
    llm.setScript([
      { text: 'Planning first.', toolCalls: [{ id: 'call_plan', name: 'task_tracker', arguments: { command: 'plan', tasks: [{ title: 'Create notes', status: 'in_progress' }, { title: 'Report', status: 'todo' }] } }], usage: USAGE },
      { toolCalls: [{ id: 'call_create', name: 'file_editor', arguments: { command: 'create', path: 'notes.md', file_text: '# Notes\n' } }], usage: USAGE },
      { text: 'Created notes.md.', usage: USAGE },
    ]);
    const answer = await first.call('session/prompt', { sessionId: session.sessionId, prompt: [{ type: 'text', text: 'Make notes' }] });
    expect(answer.stopReason).toBe('end_turn');
    await first.close();

    const second = editorFor(cwd);
    await second.initialize();
    const listed = await second.call('session/list', { cwd });
    expect(listed.sessions.map((item) => item.sessionId)).toEqual([session.sessionId]);
    const loaded = await second.call('session/load', { sessionId: session.sessionId, cwd, mcpServers: [] });
    expect(loaded.modes?.currentModeId).toBe('bypass');
    // The same updates in the same order, but for the usage: live, a turn's text streams before the usage event the log holds first.
    const without = (transcript: TranscriptEntry[], kinds: string[]) => normalise(updates(transcript).filter((update) => !kinds.includes(update.sessionUpdate)).map((update) => ({ update })), {});
    expect(without(second.transcript, ['user_message_chunk', 'usage_update'])).toEqual(without(first.transcript, ['available_commands_update', 'usage_update']));
    expect(without(second.transcript, ['user_message_chunk'])).toHaveLength(without(first.transcript, ['available_commands_update']).length);
    expect(updates(second.transcript)[0]).toEqual({ sessionUpdate: 'user_message_chunk', content: { type: 'text', text: 'Make notes' } });
    expectGolden('load-replay', normalise(second.transcript, { [cwd]: '<workdir>' }));
  });

  it('a permission request the editor left unanswered stays pending and is asked again when another editor loads the session', { timeout: 60_000 }, async () => {
    const cwd = project('pending');
    const first = editorFor(cwd, { permissions: ['cancel'] });
    await first.initialize();
    const session = await first.newSession(cwd);
    llm.setScript([
      { toolCalls: [{ id: 'call_pending', name: 'bash', arguments: { command: 'echo later > later.txt' } }], usage: USAGE },
      { text: 'Wrote it after all.', usage: USAGE },
    ]);
    void first.call('session/prompt', { sessionId: session.sessionId, prompt: [{ type: 'text', text: 'Write later.txt' }] }).catch(() => {});
    await first.until((entry) => 'permission' in entry);
    await first.close();
    expect((await conversation(session.sessionId)).status).toBe('waiting_for_confirmation');

    const second = editorFor(cwd, { permissions: ['allow_once'] });
    await second.initialize();
    await second.call('session/load', { sessionId: session.sessionId, cwd, mcpServers: [] });
    await second.until((entry) => 'permission' in entry);
    await second.untilText('Wrote it after all.');
    expect(fs.readFileSync(path.join(cwd, 'later.txt'), 'utf8')).toBe('later\n');
    const permission = second.transcript.find((entry) => 'permission' in entry);
    expect(permission).toMatchObject({ permission: { toolCallId: 'call_pending', kind: 'execute', title: 'echo later > later.txt' }, options: ['allow_once', 'allow_always', 'reject_once', 'reject_always'] });
    expect((await conversation(session.sessionId)).permissions.allow ?? []).not.toContain('bash(echo later > later.txt)');
  });

  it('ask_user: an elicitation form where the editor has them, else a message the next prompt answers', { timeout: 60_000 }, async () => {
    const cwd = project('questions');
    const asking = editorFor(cwd, { elicitation: ['blue'] });
    await asking.initialize({ elicitation: true });
    const session = await asking.newSession(cwd);
    llm.setScript([
      { toolCalls: [{ id: 'call_ask', name: 'ask_user', arguments: { question: 'Which colour?', options: ['red', 'blue'] } }], usage: USAGE },
      { text: 'Blue it is.', usage: USAGE },
    ]);
    const answered = await asking.call('session/prompt', { sessionId: session.sessionId, prompt: [{ type: 'text', text: 'Pick a colour' }] });
    expect(answered.stopReason).toBe('end_turn');
    expect(asking.transcript.find((entry) => 'elicitation' in entry)).toEqual({ elicitation: 'Which colour?', answered: 'blue' });
    expect(JSON.stringify(llm.requests.at(-1)!.body.messages!.at(-1))).toContain('blue');

    const plain = editorFor(cwd);
    await plain.initialize();
    const second = await plain.newSession(cwd);
    llm.setScript([
      { toolCalls: [{ id: 'call_ask_plain', name: 'ask_user', arguments: { question: 'Which size?' } }], usage: USAGE },
      { text: 'Large it is.', usage: USAGE },
    ]);
    const asked = await plain.call('session/prompt', { sessionId: second.sessionId, prompt: [{ type: 'text', text: 'Pick a size' }] });
    expect(asked.stopReason).toBe('end_turn');
    expect(agentText(plain.transcript)).toContain('Which size?');
    expect((await conversation(second.sessionId)).status).toBe('waiting_for_input');
    const done = await plain.call('session/prompt', { sessionId: second.sessionId, prompt: [{ type: 'text', text: 'large' }] });
    expect(done.stopReason).toBe('end_turn');
    expect(agentText(plain.transcript)).toContain('Large it is.');
  });

  it('session/new takes the MCP servers; set_config_option changes the model and the reasoning effort; resume follows without replay', { timeout: 60_000 }, async () => {
    const cwd = project('config');
    const editor = editorFor(cwd);
    await editor.initialize();
    const session = await editor.call('session/new', { cwd, mcpServers: [{ type: 'http', name: 'docs', url: 'https://mcp.example.com/mcp', headers: [{ name: 'Authorization', value: 'Bearer secret-token' }] }] });
    const created = await conversation(session.sessionId);
    expect(created.workdir).toBe(cwd);
    expect(created.mcp_servers.docs).toMatchObject({ type: 'http', url: 'https://mcp.example.com/mcp' });
    expect(JSON.stringify(created)).not.toContain('secret-token');

    const effort = await editor.call('session/set_config_option', { sessionId: session.sessionId, configId: 'reasoning_effort', value: 'high' });
    expect(effort.configOptions.find((option) => option.id === 'reasoning_effort')).toMatchObject({ currentValue: 'high' });
    await editor.call('session/set_config_option', { sessionId: session.sessionId, configId: 'model', value: 'fake-model-2' });
    expect((await conversation(session.sessionId)).llm).toMatchObject({ model: 'fake-model-2', reasoning_effort: 'high' });
    await expect(editor.agent.request('session/set_config_option', { sessionId: session.sessionId, configId: 'reasoning_effort', value: 'extreme' })).rejects.toThrow(/reasoning_effort is one of/);
    await expect(editor.agent.request('session/set_mode', { sessionId: session.sessionId, modeId: 'yolo' })).rejects.toThrow(/unknown mode/);

    const other = editorFor(cwd);
    await other.initialize();
    const resumed = await other.call('session/resume', { sessionId: session.sessionId, cwd });
    expect(resumed.configOptions?.find((option) => option.id === 'model')).toMatchObject({ currentValue: 'fake-model-2' });
    llm.setScript([{ text: 'Resumed here.', usage: USAGE }]);
    const answer = await other.call('session/prompt', { sessionId: session.sessionId, prompt: [{ type: 'text', text: 'Hello again' }] });
    expect(answer.stopReason).toBe('end_turn');
    expect(llm.requests.at(-1)!.body.model).toBe('fake-model-2');
    expect(updates(other.transcript).filter((update) => update.sessionUpdate === 'user_message_chunk')).toEqual([]);
    await expect(other.agent.request('session/load', { sessionId: '00000000-0000-4000-8000-000000000000', cwd, mcpServers: [] })).rejects.toThrow();
  });

  it('a run that reaches max_iterations_per_run answers max_turn_requests', { timeout: 60_000 }, async () => {
    const cwd = project('limit');
    const editor = editorFor(cwd);
    await editor.initialize();
    const session = await editor.newSession(cwd);
    await editor.call('session/set_mode', { sessionId: session.sessionId, modeId: 'bypass' });
    await okJson(server, 'PUT', `/conversations/${session.sessionId}/config`, { max_iterations_per_run: 1 });
    llm.setScript([
      { toolCalls: [{ id: 'call_one', name: 'bash', arguments: { command: 'echo one' } }], usage: USAGE },
      { toolCalls: [{ id: 'call_two', name: 'bash', arguments: { command: 'echo two' } }], usage: USAGE },
    ]);
    const answer = await editor.call('session/prompt', { sessionId: session.sessionId, prompt: [{ type: 'text', text: 'Keep going' }] });
    expect(answer.stopReason).toBe('max_turn_requests');
  });
});
