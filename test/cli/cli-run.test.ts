import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { spawnServer, tempDir, TEST_KEY } from '../support/agentd.js';
import { CLI, runCli, startCli } from '../support/cli.js';

/**
 * `agentd run` headless, end to end with the scripted fake LLM: against a server embedded in the
 * CLI's own process (over a temp data dir), and against a running one (AGENTD_URL + AGENTD_KEY).
 */
let base: string;
let llm: FakeLlm;
let embeddedEnv: Record<string, string>;
let workdir: string;

beforeAll(async () => {
  base = tempDir('agentd-cli-run-');
  workdir = path.join(base, 'project');
  fs.mkdirSync(workdir);
  llm = await startFakeLlm();
  embeddedEnv = { AGENTD_DATA_DIR: path.join(base, 'data'), AGENTD_LLM_MODEL: 'fake-model', AGENTD_LLM_BASE_URL: llm.url, AGENTD_LLM_API_KEY: 'sk-fake', HOME: base };
});

afterAll(async () => {
  await llm?.close();
  if (base) fs.rmSync(base, { recursive: true, force: true });
});

describe('agentd run with an embedded server', () => {
  it('works in the current directory: progress on stderr, the answer alone on stdout, exit 0, the server stopped', { timeout: 30_000 }, async () => {
    llm.setScript([{ toolCalls: [{ name: 'bash', arguments: { command: 'echo made > made-by-agent.txt && echo wrote it' } }] }, { text: 'Answer: 42' }]);
    const result = await runCli(['run', 'Write', 'a', 'file'], { env: embeddedEnv, cwd: workdir });
    expect(result.stderr).toContain('● bash(echo made > made-by-agent.txt && echo wrote it)');
    expect(result.stderr).toContain('⎿ wrote it');
    expect(result.stderr).toMatch(/tokens: \d+ in, \d+ out/);
    expect(result.stdout).toBe('Answer: 42\n');
    expect(result.code).toBe(0);
    expect(fs.readFileSync(path.join(workdir, 'made-by-agent.txt'), 'utf8')).toBe('made\n');
    expect(llm.requests.at(-2)!.body.messages!.at(-1)).toMatchObject({ role: 'user', content: 'Write a file' });
    // The embedded server let go of the data dir: a server can start over it now.
    const server = await spawnServer({ dataDir: embeddedEnv.AGENTD_DATA_DIR! });
    server.child.kill('SIGTERM');
    await server.exited;
  });

  it('--continue resumes the most recent conversation; -f FILE and stdin give the prompt', { timeout: 30_000 }, async () => {
    llm.setScript([{ text: 'Still 42.' }]);
    const promptFile = path.join(base, 'prompt.txt');
    fs.writeFileSync(promptFile, 'What was the answer?');
    const continued = await runCli(['run', '--continue', '-f', promptFile], { env: embeddedEnv, cwd: workdir });
    expect(continued.stdout).toBe('Still 42.\n');
    expect(continued.code).toBe(0);
    const history = JSON.stringify(llm.requests.at(-1)!.body.messages);
    expect(history).toContain('Answer: 42');
    expect(history).toContain('What was the answer?');

    llm.setScript([{ text: 'From stdin.' }]);
    const piped = await runCli(['run', '-c'], { env: embeddedEnv, cwd: workdir, input: 'Read me from stdin\n' });
    expect(piped.stdout).toBe('From stdin.\n');
    expect(JSON.stringify(llm.requests.at(-1)!.body.messages!.at(-1))).toContain('Read me from stdin');

    const listed = await runCli(['conversations', '--json'], { env: embeddedEnv });
    const conversations = listed.stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(conversations).toHaveLength(1);
    expect(conversations[0]).toMatchObject({ status: 'idle', workdir });
  });

  it('exits 2 without a prompt, before starting anything', async () => {
    const usage = await runCli(['run'], { env: embeddedEnv, cwd: workdir });
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('agentd: give a prompt');
  });
});

describe('agentd run against a running server (AGENTD_URL, AGENTD_KEY)', () => {
  let harness: AgentHarness;
  let env: Record<string, string>;

  beforeAll(async () => {
    harness = await startAgentHarness();
    env = { AGENTD_URL: harness.server.url, AGENTD_KEY: TEST_KEY, HOME: base };
  });

  afterAll(async () => {
    await harness?.close();
  });

  it('--json prints every event as a JSON line on stdout', { timeout: 30_000 }, async () => {
    harness.llm.setScript([{ text: 'In JSON.' }]);
    const id = await harness.createConversation();
    const result = await runCli(['run', '--json', '--resume', id, 'Answer in JSON'], { env });
    expect(result.code).toBe(0);
    const events = result.stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(events.map((event) => event.kind)).toContain('message_delta');
    expect(events.find((event) => event.kind === 'message' && event.source === 'agent')).toMatchObject({ content: 'In JSON.' });
    expect(events.at(-1)).toMatchObject({ kind: 'state_update', status: 'idle' });
  });

  it('--json includes the reasoning events and deltas; without it the reasoning is a dim progress line', { timeout: 30_000 }, async () => {
    harness.llm.setScript([{ text: 'Reasoned.', reasoning: 'Weighing the options first.' }, { text: 'Again.', reasoning: 'Still weighing.' }]);
    const id = await harness.createConversation();
    const result = await runCli(['run', '--json', '--resume', id, 'Think'], { env });
    expect(result.code).toBe(0);
    const events = result.stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(events.find((event) => event.kind === 'reasoning')).toMatchObject({ content: 'Weighing the options first.' });
    expect(events.filter((event) => event.kind === 'reasoning_delta').map((event) => event.content_delta).join('')).toBe('Weighing the options first.');
    const plain = await runCli(['run', '--resume', id, 'Think again'], { env });
    expect(plain.code).toBe(0);
    expect(plain.stderr).toContain('∴ Still weighing.');
    expect(plain.stdout).toBe('Again.\n');
  });

  it('fails with one clear line and exit 1 when the run fails', { timeout: 30_000 }, async () => {
    harness.llm.setScript([{ status: 400, body: { error: { message: 'the model refuses this request', type: 'invalid_request_error' } } }]);
    const id = await harness.createConversation();
    const failed = await runCli(['run', '--resume', id, 'Fail please'], { env });
    expect(failed.code).toBe(1);
    expect(failed.stdout).toBe('');
    expect(failed.stderr).toMatch(/agentd: the run failed: llm_\w+: .*refuses/);
  });

  it('without a terminal, refuses to approve (exit 4, says --yes); --resume ID --yes approves and finishes', { timeout: 30_000 }, async () => {
    harness.llm.setScript([{ toolCalls: [{ name: 'bash', arguments: { command: 'echo approved by --yes' } }] }, { text: 'Approved and done.' }]);
    const id = await harness.createConversation({ confirmation_mode: true });
    const waiting = await runCli(['run', '--resume', id, 'Run the echo'], { env });
    expect(waiting.code).toBe(4);
    expect(waiting.stderr).toContain('? bash(echo approved by --yes)');
    expect(waiting.stderr).toContain(`agentd run --resume ${id} --yes`);
    expect((await harness.get(`/conversations/${id}`)).body.status).toBe('waiting_for_confirmation');

    const approved = await runCli(['run', '--resume', id, '--yes'], { env });
    expect(approved.stderr).toContain('⎿ approved by --yes');
    expect(approved.stdout).toBe('Approved and done.\n');
    expect(approved.code).toBe(0);
  });

  it('conversations and events (--json, --follow) read the same server', { timeout: 30_000 }, async () => {
    harness.llm.setScript([{ text: 'Listed.' }]);
    const id = await harness.createConversation({ title: 'listed one' });
    expect((await runCli(['run', '--resume', id, 'hello'], { env })).code).toBe(0);
    const listed = await runCli(['conversations'], { env });
    expect(listed.stdout).toMatch(new RegExp(`${id}\\s+idle\\s+.*listed one`));
    const byFlags = await runCli(['conversations', '--json', '--url', harness.server.url, '--key', TEST_KEY], { env: { HOME: base } });
    expect(byFlags.stdout).toContain(`"id":"${id}"`);
    const keyAlone = await runCli(['conversations', '--key', TEST_KEY], { env: { HOME: base } });
    expect(keyAlone.code).toBe(2);
    expect(keyAlone.stderr).toContain('say which server to use');

    const events = await runCli(['events', id, '--json'], { env });
    const kinds = events.stdout.trim().split('\n').map((line) => JSON.parse(line).kind);
    expect(kinds.at(-1)).toBe('state_update');
    const transcript = await runCli(['events', id], { env });
    expect(transcript.stdout).toContain('> hello');
    expect(transcript.stdout).toContain('Listed.');

    const follow = startCli(['events', id, '--follow', '--json'], { env });
    const seen = async (text: string) => {
      const deadline = Date.now() + 15_000;
      while (!follow.stdout().includes(text)) {
        if (Date.now() > deadline) throw new Error(`never saw ${text}: ${follow.stdout()}${follow.stderr()}`);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
    };
    await seen('Listed.');
    harness.llm.setScript([{ text: 'Followed live.' }]);
    await harness.post(`/conversations/${id}/messages`, { content: 'more' });
    await seen('Followed live.');
    follow.child.kill('SIGINT');
    expect((await follow.done).code).toBe(0);
  });

  it('agentd serve still serves, like plain agentd', { timeout: 30_000 }, async () => {
    const server = await spawnServer({ dataDir: path.join(base, 'served'), command: [process.execPath, CLI, 'serve'] });
    expect((await fetch(`${server.url}/alive`)).status).toBe(200);
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  });
});
