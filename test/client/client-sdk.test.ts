import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentdClient, AgentdConnectionError, AgentdError, type AgentEvent, type StreamEvent } from '../../src/client/index.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { freePort, startServer, tempDir, TEST_KEY } from '../support/agentd.js';
import { runCli } from '../support/cli.js';

/** The SDK (`agentd/client`) against the real server on a port, with the scripted fake LLM. */
let harness: AgentHarness;
let client: AgentdClient;
let llm: { model: string; base_url: string; api_key: string };

beforeAll(async () => {
  harness = await startAgentHarness();
  client = new AgentdClient({ url: harness.server.url, apiKey: TEST_KEY });
  llm = { model: 'fake-model', base_url: harness.llm.url, api_key: 'sk-test-llm-key' };
});

afterAll(async () => {
  await harness?.close();
});

const persisted = (events: StreamEvent[]) => events.filter((event): event is AgentEvent => event.kind !== 'message_delta' && event.kind !== 'reasoning_delta');

function expectConsecutive(events: AgentEvent[], from: number): void {
  expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => from + index));
}

describe('client.run()', () => {
  let conversationId: string;
  let lastSeq: number;

  it('runs a prompt to its end: status, final text, usage of the run, every event with deltas', async () => {
    harness.llm.setScript([{ toolCalls: [{ name: 'bash', arguments: { command: 'echo hello from the sdk' } }] }, { text: 'All done: hello.' }]);
    const result = await client.run({ prompt: 'Say hello with bash', llm });
    conversationId = result.conversation_id;
    expect(result.status).toBe('idle');
    expect(result.final_text).toBe('All done: hello.');
    expect(result.error).toBeNull();
    expect(result.output).toBeNull();
    const [run] = (await client.runs.list(conversationId)).items;
    expect(result.run_ids).toEqual([run!.id]);
    expect(result.usage).toEqual({ prompt_tokens: run!.usage.prompt_tokens, completion_tokens: run!.usage.completion_tokens, cost: run!.usage.cost });
    expect(result.usage.prompt_tokens).toBeGreaterThan(0);
    const kinds = result.events.map((event) => event.kind);
    expect(kinds).toContain('message_delta');
    expect(kinds).toContain('action');
    expect(result.events.find((event) => event.kind === 'observation')).toMatchObject({ tool_name: 'bash', content: expect.stringContaining('hello from the sdk') });
    // Everything the log holds for this conversation, in order, each once.
    const log = (await client.events.list(conversationId, { limit: 1000 })).items;
    const seen = persisted(result.events);
    expect(seen.map((event) => event.id)).toEqual(log.map((event) => event.id));
    expectConsecutive(seen, 1);
    expect(seen.at(-1)).toMatchObject({ kind: 'state_update', status: 'idle', run_id: run!.id });
    lastSeq = seen.at(-1)!.seq;
  });

  it('resumes a conversation by id: only the new run\'s events, right after the last seq', async () => {
    harness.llm.setScript([{ text: 'Second answer.' }]);
    const result = await client.run({ prompt: 'And again', conversation_id: conversationId });
    expect(result.conversation_id).toBe(conversationId);
    expect(result.final_text).toBe('Second answer.');
    const seen = persisted(result.events);
    expect(seen[0]).toMatchObject({ kind: 'message', source: 'user', content: 'And again' });
    expectConsecutive(seen, lastSeq + 1);
    const request = harness.llm.requests.at(-1)!;
    expect(JSON.stringify(request.body)).toContain('All done: hello.');
  });

  it('an AbortSignal pauses the run, interrupting its tool; run() then says paused', async () => {
    harness.llm.setScript([{ toolCalls: [{ name: 'bash', arguments: { command: 'sleep 30' } }] }]);
    const pause = new AbortController();
    const started = Date.now();
    const result = await client.run({ prompt: 'Sleep', llm, signal: pause.signal, onEvent: (event) => event.kind === 'action' && pause.abort() });
    expect(result.status).toBe('paused');
    expect(Date.now() - started).toBeLessThan(25_000);
    // Still running when it was stopped (null), ended by the C-c the pause sent (130), killed when the
    // C-c's one-second grace ran out on a loaded machine (137), or stopped just before it started (the
    // pause can land between the action event and the command): never run to its end.
    const observation = result.events.find((event) => event.kind === 'observation') as any;
    expect(observation).toMatchObject({ tool_name: 'bash' });
    expect([null, 130, 137, undefined]).toContain(observation.data.exit_code);
    expect(observation.content).toMatch(/Interrupted|paused|Not run: the run was stopped/);
    expect((await client.conversations.get(result.conversation_id)).status).toBe('paused');
  });

  it('asks onApproval for pending actions and continues with the approval; without it, ends waiting', async () => {
    harness.llm.setScript([{ toolCalls: [{ name: 'bash', arguments: { command: 'echo approved-and-ran' } }] }, { text: 'Ran it.' }]);
    const asked: string[] = [];
    const approved = await client.run({
      prompt: 'Run echo',
      llm,
      confirmation_mode: true,
      onApproval: (pending) => {
        asked.push(...pending.map((action) => action.tool_name));
        return 'approve';
      },
    });
    expect(asked).toEqual(['bash']);
    expect(approved.status).toBe('idle');
    expect(approved.final_text).toBe('Ran it.');
    expect(approved.run_ids).toHaveLength(2);
    expect(approved.events.find((event) => event.kind === 'observation')).toMatchObject({ content: expect.stringContaining('approved-and-ran') });

    harness.llm.setScript([{ toolCalls: [{ name: 'bash', arguments: { command: 'echo never' } }] }]);
    const waiting = await client.run({ prompt: 'Run echo', llm, confirmation_mode: true });
    expect(waiting.status).toBe('waiting_for_confirmation');
    expect((await client.conversations.get(waiting.conversation_id)).pending_actions).toHaveLength(1);
  });

  it('answers ask_user questions with onQuestion (runs.answer); without it, ends waiting for input', async () => {
    harness.llm.setScript([{ toolCalls: [{ id: 'call_q1', name: 'ask_user', arguments: { question: 'Tabs or spaces?', options: ['tabs', 'spaces'] } }] }, { text: 'Spaces then.' }]);
    const asked: string[] = [];
    const answered = await client.run({ prompt: 'Format it', llm, onQuestion: (question) => (asked.push(question.question), 'spaces') });
    expect(asked).toEqual(['Tabs or spaces?']);
    expect(answered).toMatchObject({ status: 'idle', final_text: 'Spaces then.' });
    expect(answered.events.find((event) => event.kind === 'observation')).toMatchObject({ tool_name: 'ask_user', content: 'spaces' });

    harness.llm.setScript([{ toolCalls: [{ id: 'call_q2', name: 'ask_user', arguments: { question: 'Which file?' } }] }, { text: 'README it is.' }]);
    const waiting = await client.run({ prompt: 'Edit a file', llm });
    expect(waiting.status).toBe('waiting_for_input');
    expect(await client.runs.answer(waiting.conversation_id, { content: 'README' })).toEqual({ tool_call_id: 'call_q2', run_id: waiting.run_ids[0] });
  });
});

describe('errors', () => {
  it('carry the contract\'s error code and status', async () => {
    const missing = await client.conversations.get('00000000-0000-4000-8000-000000000000').catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(AgentdError);
    expect(missing).toMatchObject({ status: 404, code: 'conversation_not_found' });
    const invalid = await client.conversations.create({ max_iterations_per_run: 0 }).catch((error: unknown) => error);
    expect(invalid).toMatchObject({ status: 400, code: 'validation_error' });
    expect((invalid as AgentdError).details).toHaveProperty('issues');
    const unauthorized = await new AgentdClient({ url: harness.server.url, apiKey: 'wrong' }).conversations.list().catch((error: unknown) => error);
    expect(unauthorized).toMatchObject({ status: 401, code: 'unauthorized' });
    const unreachable = await new AgentdClient({ url: `http://127.0.0.1:${await freePort()}` }).health.alive().catch((error: unknown) => error);
    expect(unreachable).toBeInstanceOf(AgentdConnectionError);
  });
});

describe('every route', () => {
  it('has a client method named by its operationId', () => {
    const document = JSON.parse(fs.readFileSync(path.resolve(import.meta.dirname, '../../openapi/openapi.json'), 'utf8'));
    const missing: string[] = [];
    for (const methods of Object.values(document.paths) as Record<string, { operationId: string }>[]) {
      for (const operation of Object.values(methods)) {
        const [group, name] = operation.operationId.split('.');
        if (typeof (client as any)[group!]?.[name!] !== 'function') missing.push(operation.operationId);
      }
    }
    expect(missing).toEqual([]);
  });

  it('works against the server, group by group', async () => {
    expect(await client.health.alive()).toEqual({ status: 'ok' });
    expect((await client.health.ready()).status).toBe('ok');
    expect((await client.health.info()).name).toBe('agentd');
    expect(await client.health.metrics()).toContain('# HELP');
    expect((await client.health.openapi()).openapi).toMatch(/^3\.1/);
    expect((await client.health.asyncapi()).asyncapi).toBeDefined();

    const workdir = tempDir('agentd-sdk-workdir-');
    const conversation = await client.conversations.create({ workdir, title: 'routes', llm });
    const id = conversation.id;
    expect((await client.conversations.count()).count).toBeGreaterThan(0);
    expect((await client.conversations.updateConfig(id, { title: 'renamed' })).title).toBe('renamed');
    const listed: string[] = [];
    for await (const item of client.conversations.all({ limit: 1 })) listed.push(item.id);
    expect(listed).toContain(id);

    const uploaded = await client.files.upload(id, [{ path: 'notes/a.txt', content: 'alpha\n' }, { path: 'b.bin', content: new Uint8Array([0, 1, 2]) }]);
    expect(uploaded.items.map((item) => item.path)).toEqual(['notes/a.txt', 'b.bin']);
    expect(await client.files.readText(id, 'notes/a.txt')).toBe('alpha\n');
    expect([...(await client.files.download(id, 'b.bin'))]).toEqual([0, 1, 2]);
    expect((await client.files.list(id, { recursive: true })).items.map((item) => item.path)).toContain('notes/a.txt');
    expect((await client.files.search(id, { pattern: '**/*.txt' })).items.map((item) => item.path)).toEqual(['notes/a.txt']);
    expect((await client.files.mkdir(id, 'deep/er')).type).toBe('directory');
    await client.files.delete(id, 'notes/a.txt');
    expect(fs.existsSync(path.join(workdir, 'notes/a.txt'))).toBe(false);

    expect((await client.secrets.put(id, { SDK_TOKEN: 'sdk-secret-value' })).names).toEqual(['SDK_TOKEN']);
    const command = await client.commands.run(id, { command: 'echo "$SDK_TOKEN" && cat b.bin | wc -c' });
    expect(command.exit_code).toBe(0);
    expect(command.stdout).toContain('<secret:SDK_TOKEN>');
    expect(command.stdout).not.toContain('sdk-secret-value');
    expect((await client.secrets.list(id)).names).toEqual(['SDK_TOKEN']);
    await client.secrets.delete(id, 'SDK_TOKEN');
    expect((await client.secrets.list(id)).names).toEqual([]);
    expect(await client.mcp.status(id)).toEqual({ servers: [] });

    const callback = await client.callbacks.create(id, { url: 'http://127.0.0.1:9/hook', events: ['message'] });
    expect((await client.callbacks.list(id)).items.map((item) => item.id)).toEqual([callback.id]);
    expect((await client.callbacks.deliveries(id, callback.id)).items).toEqual([]);
    expect((await client.callbacks.enable(id, callback.id)).id).toBe(callback.id);
    await client.callbacks.delete(id, callback.id);

    harness.llm.setScript([{ text: 'Routes answered.' }]);
    const accepted = await client.messages.send(id, { content: 'hi' });
    await harness.waitForStatus(id, ['idle']);
    const run = await client.runs.get(id, accepted.run_id!);
    expect(run.status).toBe('completed');
    expect((await client.runs.list(id)).items.map((item) => item.id)).toEqual([run.id]);
    expect((await client.runs.setConfirmation(id, true)).confirmation_mode).toBe(true);
    expect((await client.runs.pause(id)).status).toBe('idle');
    const cancel = await client.runs.cancel(id, run.id).catch((error: unknown) => error);
    expect(cancel).toMatchObject({ status: 409 });
    const rejected = await client.runs.reject(id).catch((error: unknown) => error);
    expect(rejected).toBeInstanceOf(AgentdError);
    const approved = await client.runs.approve(id).catch((error: unknown) => error);
    expect(approved).toBeInstanceOf(AgentdError);
    harness.llm.setScript([{ text: 'Started by runs.start.' }]);
    const started = await client.runs.start(id);
    expect(started.run_id).toMatch(/-/);
    await harness.waitForStatus(id, ['idle']);
    // Two exchanges are too short to condense with the default keep_last: a typed 409.
    const condensed = await client.conversations.condense(id, { instructions: 'keep the routes' }).catch((error: unknown) => error);
    expect(condensed).toMatchObject({ status: 409, code: 'nothing_to_condense' });

    const messages = (await client.events.list(id, { kind: ['message'] })).items;
    expect(messages.map((event) => event.kind)).toEqual(messages.map(() => 'message'));
    expect((await client.events.count(id, { kind: ['message'] })).count).toBe(messages.length);
    expect((await client.events.get(id, messages[0]!.id)).id).toBe(messages[0]!.id);
    const streamed: AgentEvent[] = [];
    const stop = new AbortController();
    for await (const event of client.events.stream(id, { after: 0, signal: stop.signal })) {
      if (event.kind === 'message_delta' || event.kind === 'reasoning_delta') continue;
      streamed.push(event);
      if (event.seq === messages.at(-1)!.seq) stop.abort();
    }
    expectConsecutive(streamed, 1);
    const firehose = new AbortController();
    for await (const item of client.events.firehose({ signal: firehose.signal })) {
      expect(item.cursor).toBeGreaterThan(0);
      firehose.abort();
    }

    await client.conversations.delete(id, { delete_workdir: false });
    await expect(client.conversations.get(id)).rejects.toMatchObject({ code: 'conversation_not_found' });
    fs.rmSync(workdir, { recursive: true, force: true });
  });
});

describe('the README', () => {
  it('has an SDK example that runs as written (query, run, AgentdError)', { timeout: 30_000 }, async () => {
    const readme = fs.readFileSync(path.resolve(import.meta.dirname, '../../README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Clients'), readme.indexOf('\n## ', readme.indexOf('## Clients') + 5));
    const example = /```ts\n([\s\S]*?)```/.exec(section)![1]!;
    expect(example).toContain("from 'agentd/client'");
    const { transform } = await import('esbuild');
    const clientUrl = pathToFileURL(path.resolve(import.meta.dirname, '../../dist/client/index.js')).href;
    const { code } = await transform(example.replace("'agentd/client'", JSON.stringify(clientUrl)), { loader: 'ts', format: 'esm' });
    const dir = tempDir('agentd-readme-sdk-');
    fs.writeFileSync(path.join(dir, 'example.mjs'), code);
    harness.llm.setScript([{ toolCalls: [{ name: 'bash', arguments: { command: 'ls' } }] }, { text: 'No files yet.' }, { text: 'There are none.' }]);
    // A server whose default LLM is the fake, as the example creates its conversation without one.
    const server = await startServer({ env: { AGENTD_LLM_MODEL: 'fake-model', AGENTD_LLM_BASE_URL: harness.llm.url, AGENTD_LLM_API_KEY: 'sk-fake' } });
    const result = await runCli([], { command: [process.execPath, path.join(dir, 'example.mjs')], env: { AGENTD_URL: server.url, AGENTD_KEY: TEST_KEY } });
    await server.close();
    fs.rmSync(dir, { recursive: true, force: true });
    expect(result.stderr).toBe('');
    expect(result.stdout).toContain('> bash { command: \'ls\' }');
    expect(result.stdout).toContain('No files yet.');
    expect(result.stdout).toMatch(/idle There are none\. \d+ \d+/);
    expect(result.stdout).toContain('404 conversation_not_found');
    expect(result.code).toBe(0);
  });
});

describe('the package', () => {
  it('exports the client as agentd/client (built dist/)', async () => {
    const module = await import('agentd/client');
    expect(module.AgentdClient).toBeTypeOf('function');
    expect(new module.AgentdClient({ url: harness.server.url })).toBeInstanceOf(module.AgentdClient);
  });
});
