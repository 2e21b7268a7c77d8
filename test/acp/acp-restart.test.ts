import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort, tempDir, TEST_KEY } from '../support/agentd.js';
import { waitForProcess } from '../support/processes.js';
import { restartableServer, RESTART_TEST_TIMEOUT } from '../support/restartable-server.js';
import { AcpEditor, expectGolden, normalise, updates, type TranscriptEntry } from './acp-editor.js';

/**
 * The server behind `agentd acp` is killed with SIGKILL mid-turn and started again on its data
 * dir: the bridge resumes the conversation's stream with Last-Event-ID, continues the run the
 * restart cut off, and the editor sees every update once: the same ones another editor replays
 * from the log.
 */
const servers = restartableServer();
const editors: AcpEditor[] = [];

afterEach(async () => {
  await Promise.all(editors.splice(0).map((editor) => editor.close()));
});

const USAGE = { prompt_tokens: 300, completion_tokens: 50 };

describe('agentd acp when the server is killed mid-turn', () => {
  it('resumes after the restart: the turn ends, and no update is lost or duplicated', { timeout: RESTART_TEST_TIMEOUT }, async () => {
    const base = tempDir('agentd-acp-restart-');
    const cwd = path.join(base, 'project');
    fs.mkdirSync(cwd);
    const llm = await servers.fakeLlm([
      { text: 'Starting the long job.', toolCalls: [{ id: 'call_long', name: 'bash', arguments: { command: 'sleep 61.3' } }], usage: USAGE },
      { text: 'Recovered after the restart.', usage: USAGE },
    ]);
    // The same port after the restart: the bridge knows the server by its address.
    const port = await freePort();
    const server = await servers.start({ dataDir: path.join(base, 'data'), port, env: { AGENTD_LLM_MODEL: 'fake-model', AGENTD_LLM_BASE_URL: llm.url, AGENTD_LLM_API_KEY: 'sk-fake' } });
    const env = { AGENTD_EDITOR_KEY: TEST_KEY, HOME: base };
    const editor = new AcpEditor({ env, cwd, args: ['--url', server.url, '--key-env', 'AGENTD_EDITOR_KEY'] });
    editors.push(editor);
    await editor.initialize();
    const session = await editor.newSession(cwd);
    await editor.call('session/set_mode', { sessionId: session.sessionId, modeId: 'bypass' });

    const prompt = editor.call('session/prompt', { sessionId: session.sessionId, prompt: [{ type: 'text', text: 'Run the long job' }] });
    await editor.until((entry) => 'update' in entry && entry.update.sessionUpdate === 'tool_call');
    await waitForProcess('sleep 61.3');
    await servers.restart();
    expect((await prompt).stopReason).toBe('end_turn');
    expect(editor.stderr()).toContain('continuing it');

    const interrupted = updates(editor.transcript).find((update) => update.sessionUpdate === 'tool_call_update');
    expect(interrupted).toMatchObject({ toolCallId: 'call_long', status: 'failed' });
    expectGolden('server-restart', normalise(editor.transcript, { [cwd]: '<workdir>', [server.url]: '<server>' }));

    const reader = new AcpEditor({ env, cwd, args: ['--url', server.url, '--key-env', 'AGENTD_EDITOR_KEY'] });
    editors.push(reader);
    await reader.initialize();
    await reader.call('session/load', { sessionId: session.sessionId, cwd, mcpServers: [] });
    const without = (transcript: TranscriptEntry[], kinds: string[]) => normalise(updates(transcript).filter((update) => !kinds.includes(update.sessionUpdate)).map((update) => ({ update })), {});
    expect(without(reader.transcript, ['user_message_chunk', 'usage_update'])).toEqual(without(editor.transcript, ['available_commands_update', 'usage_update']));
    expect(without(reader.transcript, ['user_message_chunk'])).toHaveLength(without(editor.transcript, ['available_commands_update']).length);
  });
});
