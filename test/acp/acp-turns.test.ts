import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { tempDir } from '../support/agentd.js';
import { AcpEditor, expectGolden, normalise, updates } from './acp-editor.js';

/**
 * `agentd acp` driven by an editor built on the official ACP library (its client side, over the
 * child's stdio), with a server embedded in the bridge's process and the scripted fake LLM. Each
 * turn's transcript is compared with its golden file (test/acp/golden/).
 */
let base: string;
let llm: FakeLlm;
let env: Record<string, string>;
let editor: AcpEditor | undefined;

beforeAll(async () => {
  base = tempDir('agentd-acp-');
  llm = await startFakeLlm();
  env = { AGENTD_DATA_DIR: path.join(base, 'data'), AGENTD_LLM_MODEL: 'fake-model', AGENTD_LLM_BASE_URL: llm.url, AGENTD_LLM_API_KEY: 'sk-fake', HOME: base };
});

afterEach(async () => {
  await editor?.close();
  editor = undefined;
});

afterAll(async () => {
  await llm?.close();
});

function project(name: string): string {
  const dir = path.join(base, name);
  fs.mkdirSync(dir, { recursive: true });
  return dir;
}

const USAGE = { prompt_tokens: 120, completion_tokens: 30 };
/** A 1x1 PNG. */
const PIXEL = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';

describe('agentd acp with an embedded server', () => {
  it('answers initialize with its capabilities, and a text turn streams the answer and ends with end_turn', { timeout: 60_000 }, async () => {
    const cwd = project('text');
    // --data-dir names the embedded server's data dir (the other tests use AGENTD_DATA_DIR).
    const { AGENTD_DATA_DIR: dataDir, ...withoutDataDir } = env;
    editor = new AcpEditor({ env: withoutDataDir, cwd, args: ['--data-dir', dataDir!] });
    const init = await editor.initialize();
    expect(init.agentCapabilities).toMatchObject({ loadSession: true, promptCapabilities: { image: true, embeddedContext: true }, mcpCapabilities: { http: true }, sessionCapabilities: { list: {}, resume: {} } });
    llm.setScript([{ text: 'Hello from agentd. The answer is 42.', usage: USAGE }]);
    const session = await editor.newSession(cwd);
    expect(session.modes?.currentModeId).toBe('default');
    const answer = await editor.call('session/prompt', { sessionId: session.sessionId, prompt: [{ type: 'text', text: 'What is the answer?' }] });
    expect(answer.stopReason).toBe('end_turn');
    expect(llm.requests.at(-1)!.body.messages!.at(-1)).toMatchObject({ role: 'user', content: 'What is the answer?' });
    expectGolden('text-turn', normalise(editor.transcript, { [cwd]: '<workdir>' }));
    expect(editor.foreignStdoutLines()).toEqual([]);
    expect(editor.stderr()).toContain(`agentd acp: serving from the data dir ${dataDir}`);
  });

  it("shows the model's reasoning as agent_thought_chunk updates before its answer", { timeout: 60_000 }, async () => {
    const cwd = project('reasoning');
    editor = new AcpEditor({ env, cwd });
    await editor.initialize();
    const reasoning = 'The user asks for the answer; it is 42, so say that.';
    llm.setScript([{ reasoning, text: 'The answer is 42.', usage: USAGE }]);
    const session = await editor.newSession(cwd);
    const answer = await editor.call('session/prompt', { sessionId: session.sessionId, prompt: [{ type: 'text', text: 'What is the answer?' }] });
    expect(answer.stopReason).toBe('end_turn');
    const shown = updates(editor.transcript).filter((update) => update.sessionUpdate === 'agent_thought_chunk' || update.sessionUpdate === 'agent_message_chunk');
    const thoughts = shown.filter((update) => update.sessionUpdate === 'agent_thought_chunk');
    expect(thoughts.length).toBeGreaterThan(0);
    // The whole reasoning once (its deltas, then nothing more from the persisted event), before the answer's first chunk.
    expect(thoughts.map((update) => (update.content.type === 'text' ? update.content.text : '')).join('')).toBe(reasoning);
    expect(shown.findIndex((update) => update.sessionUpdate === 'agent_message_chunk')).toBeGreaterThan(shown.findLastIndex((update) => update.sessionUpdate === 'agent_thought_chunk'));
    expectGolden('reasoning-turn', normalise(editor.transcript, { [cwd]: '<workdir>' }));
  });

  it('refuses a prompt it cannot pass on, with the reason', { timeout: 60_000 }, async () => {
    const cwd = project('refused');
    editor = new AcpEditor({ env, cwd });
    await editor.initialize();
    const session = await editor.newSession(cwd);
    await expect(editor.agent.request('session/prompt', { sessionId: session.sessionId, prompt: [{ type: 'audio', data: 'AAAA', mimeType: 'audio/wav' }] })).rejects.toThrow(/audio content is not supported/);
    await expect(editor.agent.request('session/prompt', { sessionId: '00000000-0000-4000-8000-000000000000', prompt: [{ type: 'text', text: 'hi' }] })).rejects.toThrow();
  });

  it("passes images and attached files to the model, and announces the project's slash commands", { timeout: 60_000 }, async () => {
    const cwd = project('context');
    fs.mkdirSync(path.join(cwd, '.claude', 'commands'), { recursive: true });
    fs.writeFileSync(path.join(cwd, '.claude', 'commands', 'review.md'), '---\ndescription: Review a file\nargument-hint: <file>\n---\nReview $ARGUMENTS carefully.\n');
    editor = new AcpEditor({ env, cwd });
    await editor.initialize();
    const session = await editor.newSession(cwd);
    expect(updates(editor.transcript).find((update) => update.sessionUpdate === 'available_commands_update')).toMatchObject({ availableCommands: [{ name: 'review', description: 'Review a file', input: { hint: '<file>' } }] });
    llm.setScript([{ text: 'A red pixel and a constant.', usage: USAGE }]);
    const answer = await editor.call('session/prompt', {
      sessionId: session.sessionId,
      prompt: [
        { type: 'text', text: 'What are these?' },
        { type: 'image', mimeType: 'image/png', data: PIXEL },
        { type: 'resource', resource: { uri: `file://${cwd}/a.ts`, mimeType: 'text/typescript', text: 'export const a = 1;' } },
      ],
    });
    expect(answer.stopReason).toBe('end_turn');
    const sent = JSON.stringify(llm.requests.at(-1)!.body.messages!.at(-1));
    expect(sent).toContain('What are these?');
    expect(sent).toContain(`data:image/png;base64,${PIXEL}`);
    expect(sent).toContain('export const a = 1;');
  });

  it('a tool turn: the edit is a tool call of kind edit with its diff, and its result completes it', { timeout: 60_000 }, async () => {
    const cwd = project('edit');
    fs.writeFileSync(path.join(cwd, 'greeting.txt'), 'hello world\n');
    editor = new AcpEditor({ env, cwd });
    await editor.initialize();
    const session = await editor.newSession(cwd);
    await editor.call('session/set_mode', { sessionId: session.sessionId, modeId: 'accept_edits' });
    llm.setScript([
      { text: 'I will edit the file.', toolCalls: [{ id: 'call_edit', name: 'file_editor', arguments: { command: 'str_replace', path: 'greeting.txt', old_str: 'hello world', new_str: 'hello editor' } }], usage: USAGE },
      { text: 'Done: the greeting now says hello editor.', usage: USAGE },
    ]);
    const answer = await editor.call('session/prompt', { sessionId: session.sessionId, prompt: [{ type: 'text', text: 'Change the greeting' }] });
    expect(answer.stopReason).toBe('end_turn');
    expect(fs.readFileSync(path.join(cwd, 'greeting.txt'), 'utf8')).toBe('hello editor\n');
    expect(editor.transcript.some((entry) => 'permission' in entry)).toBe(false);
    const done = updates(editor.transcript).find((update) => update.sessionUpdate === 'tool_call_update');
    expect(done).toMatchObject({ status: 'completed', content: [{ type: 'diff', path: path.join(cwd, 'greeting.txt'), oldText: 'hello world', newText: 'hello editor' }] });
    expectGolden('edit-turn', normalise(editor.transcript, { [cwd]: '<workdir>' }));
  });
});
