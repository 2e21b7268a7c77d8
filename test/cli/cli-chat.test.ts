import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { TEST_KEY } from '../support/agentd.js';
import { CLI } from '../support/cli.js';
import { ptyLauncher, startPty, type PtySession } from '../support/pty.js';

/**
 * `agentd chat` under a real pseudo-terminal (python3's pty module or util-linux `script`), driven
 * by keystrokes: a prompt, the streamed answer, an inline approval, Ctrl-C pausing a run, history
 * recall, /new, Ctrl-C twice to exit, then `--resume` rebuilding the view from the event log.
 */
const launcher = ptyLauncher();
if (!launcher) console.warn('cli-chat.test.ts skipped: neither python3 (pty module) nor util-linux script is installed');

let harness: AgentHarness;
let env: Record<string, string>;

beforeAll(async () => {
  harness = await startAgentHarness();
  env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: os.tmpdir(), NO_COLOR: '1', TERM: 'xterm', AGENTD_URL: harness.server.url, AGENTD_KEY: TEST_KEY };
});

afterAll(async () => {
  await harness?.close();
});

async function statusOf(id: string): Promise<string> {
  return (await harness.get(`/conversations/${id}`)).body.status;
}

async function waitForStatus(id: string, status: string): Promise<void> {
  await harness.waitForStatus(id, [status], 20_000);
}

describe.skipIf(!launcher)('agentd chat in a terminal', () => {
  let conversationId: string;

  it('streams the reasoning on its own lines before the answer, each once', { timeout: 60_000 }, async () => {
    const id = await harness.createConversation();
    const chat: PtySession = startPty(launcher!, [process.execPath, CLI, 'chat', '--resume', id], { env });
    try {
      await chat.waitFor('Type a message');
      harness.llm.setScript([{ text: 'The answer is four.', reasoning: 'Two and two make four.', chunkDelayMs: 5 }]);
      const mark = chat.output().length;
      chat.write('Add two and two\r');
      await chat.waitFor('The answer is four.', { from: mark });
      await chat.waitFor(/> $/, { from: mark });
      const text = chat.text(mark);
      expect(text.split('Two and two make four.'), JSON.stringify(text)).toHaveLength(2);
      expect(text.split('The answer is four.')).toHaveLength(2);
      expect(text).toMatch(/Two and two make four\.\r?\nThe answer is four\./);
    } finally {
      chat.write('\x03');
      chat.write('\x03');
      await Promise.race([chat.exited, new Promise((resolve) => setTimeout(resolve, 5_000))]);
      if (chat.child.exitCode === null) chat.child.kill();
    }
  });

  it('streams answers, approves inline, pauses on Ctrl-C, recalls history, exits on a second Ctrl-C', { timeout: 90_000 }, async () => {
    const id = await harness.createConversation({ confirmation_mode: true });
    conversationId = id;
    const chat: PtySession = startPty(launcher!, [process.execPath, CLI, 'chat', '--resume', id], { env });
    await chat.waitFor('Type a message');

    harness.llm.setScript([{ text: 'Hello from the streamed answer.', chunkDelayMs: 10 }]);
    let mark = chat.output().length;
    chat.write('Say hello\r');
    await chat.waitFor('Hello from the streamed answer.', { from: mark });
    await chat.waitFor(/> $/, { from: mark });
    // Streamed as deltas and not printed again when the full message arrives.
    expect(chat.text(mark).split('Hello from the streamed answer.'), JSON.stringify(chat.output().slice(mark))).toHaveLength(2);

    harness.llm.setScript([{ toolCalls: [{ name: 'bash', arguments: { command: 'echo approved in chat' } }] }, { text: 'Chat approval done.' }]);
    mark = chat.output().length;
    chat.write('Run the echo\r');
    await chat.waitFor('? bash(echo approved in chat)', { from: mark });
    await chat.waitFor('Approve? [y/N]', { from: mark });
    chat.write('y\r');
    await chat.waitFor('⎿ approved in chat', { from: mark });
    await chat.waitFor('Chat approval done.', { from: mark });
    await chat.waitFor(/> $/, { from: mark });

    harness.llm.setScript([{ toolCalls: [{ name: 'bash', arguments: { command: 'sleep 30' } }] }]);
    mark = chat.output().length;
    chat.write('Sleep a while\r');
    await chat.waitFor('Approve? [y/N]', { from: mark });
    chat.write('y\r');
    await waitForStatus(id, 'running');
    chat.write('\x03');
    await chat.waitFor('(pausing the run', { from: mark });
    await chat.waitFor('[paused', { from: mark });
    await waitForStatus(id, 'paused');
    await chat.waitFor(/> $/, { from: mark });

    // Up arrow: the last prompt comes back for editing; Ctrl-U clears it again.
    mark = chat.output().length;
    chat.write('\x1b[A');
    await chat.waitFor('Sleep a while', { from: mark });
    chat.write('\x15/new\r');
    await chat.waitFor('(a new conversation starts with your next message)', { from: mark });

    chat.write('\x03\x03');
    expect(await chat.exited).toBe(0);
    expect(await statusOf(id)).toBe('paused');
  });

  it('--resume rebuilds the conversation from its event log, then /exit leaves', { timeout: 60_000 }, async () => {
    const chat = startPty(launcher!, [process.execPath, CLI, 'chat', '--resume', conversationId], { env });
    await chat.waitFor('Type a message');
    const screen = chat.text();
    expect(screen).toContain(`resuming conversation ${conversationId}`);
    for (const line of ['> Say hello', 'Hello from the streamed answer.', '● bash(echo approved in chat)', '⎿ approved in chat', 'Chat approval done.', '> Sleep a while', '● bash(sleep 30)']) expect(screen).toContain(line);
    expect(screen.indexOf('> Say hello')).toBeLessThan(screen.indexOf('Chat approval done.'));
    chat.write('/exit\r');
    expect(await chat.exited).toBe(0);
  });

  it('asks the agent\'s question in plain words (no API status line), then Ctrl-D leaves quietly with exit 0', { timeout: 60_000 }, async () => {
    harness.llm.setScript([{ toolCalls: [{ id: 'call_ask', name: 'ask_user', arguments: { question: 'Which branch?', options: ['main', 'dev'] } }] }, { text: 'Using dev.' }]);
    const id = await harness.createConversation();
    const chat = startPty(launcher!, [process.execPath, CLI, 'chat', '--resume', id], { env });
    await chat.waitFor('Type a message');
    const mark = chat.output().length;
    chat.write('Pick a branch\r');
    await chat.waitFor('? Which branch? (main / dev)', { from: mark });
    await chat.waitFor('Answer:', { from: mark });
    chat.write('dev\r');
    await chat.waitFor('Using dev.', { from: mark });
    await chat.waitFor(/> $/, { from: mark });
    expect(chat.text(mark)).not.toContain('waiting_for_input');
    expect(chat.text(mark)).not.toContain('POST /answer');
    chat.write('\x04');
    expect(await chat.exited).toBe(0);
    expect(chat.text(mark)).not.toContain('Aborted');
  });

  it('agentd run asks for approval on a terminal and continues with the answer', { timeout: 60_000 }, async () => {
    harness.llm.setScript([{ toolCalls: [{ name: 'bash', arguments: { command: 'echo approved on a tty' } }] }, { text: 'Approved on the terminal.' }]);
    const id = await harness.createConversation({ confirmation_mode: true });
    const run = startPty(launcher!, [process.execPath, CLI, 'run', '--resume', id, 'Echo it'], { env });
    await run.waitFor('? bash(echo approved on a tty)');
    await run.waitFor('Approve? [y/N]');
    run.write('y\r');
    await run.waitFor('⎿ approved on a tty');
    await run.waitFor('Approved on the terminal.');
    expect(await run.exited).toBe(0);
    expect(await statusOf(id)).toBe('idle');
  });
});
