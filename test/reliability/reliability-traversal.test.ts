/**
 * R4 traversal, the routes files-traversal.test.ts does not cover: every payload of the shared
 * corpus as the `cwd` of POST /commands, and as the path arguments of the agent's file tools
 * (file_editor, glob, grep) called by the LLM through a real run; and workdirs (create, PUT
 * /config) that would reach into the server's data directory. Nothing is read, written or run
 * outside the workdir. (file-editor.test.ts and glob-grep.test.ts run the corpus through the
 * tools directly, resolve-path.test.ts through the resolver.)
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OpenAiLlmClient } from '../../src/adapters/llm/openai-llm.js';
import { startFakeLlm, type FakeLlm, type FakeToolCall } from '../fake-llm/fake-llm-server.js';
import { startServer, type TestServer } from '../support/agentd.js';
import { allEvents, apiClient, until, type Api } from '../support/reliability.js';
import { CANARY_CONTENT, createTraversalFixture, SECRET_CONTENT, type TraversalFixture } from '../support/traversal-fixture.js';

let fixture: TraversalFixture;
let server: TestServer;
let llm: FakeLlm;
let api: Api;
let conversationId: string;

/** Everything under the workdir, symlinks read but never followed. */
function workdirSnapshot(): string[] {
  return fs
    .readdirSync(fixture.workdir, { recursive: true, withFileTypes: true })
    .map((entry) => {
      const full = path.join(entry.parentPath, entry.name);
      return `${path.relative(fixture.workdir, full)} ${entry.isSymbolicLink() ? `-> ${fs.readlinkSync(full)}` : entry.isDirectory() ? 'dir' : fs.statSync(full).size}`;
    })
    .sort();
}

const leaked = (text: string) => text.includes(CANARY_CONTENT.trim()) || text.includes(SECRET_CONTENT.trim()) || text.includes('root:x:0:0');

beforeAll(async () => {
  fixture = await createTraversalFixture();
  llm = await startFakeLlm([]);
  server = await startServer({ overrides: { llm: new OpenAiLlmClient({ retryBaseDelayMs: 20, retryMaxDelayMs: 100 }) } });
  api = apiClient(server.url);
  const created = await api.post('/conversations', { workdir: fixture.workdir, llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, max_iterations_per_run: 1000 });
  expect(created.status, created.text).toBe(201);
  conversationId = created.json().id;
});
afterAll(async () => {
  await server?.close();
  await llm?.close();
  await fixture?.cleanup();
});

describe('traversal corpus beyond the file routes', () => {
  it('refuses every payload as the cwd of a command, and runs nothing', async () => {
    expect(fixture.payloads.length).toBeGreaterThanOrEqual(50);
    const outsideBefore = await fixture.outsideSnapshot();
    const marker = path.join(fixture.base, 'command-ran');
    const wrong: string[] = [];
    for (const payload of fixture.payloads) {
      const response = await api.post(`/conversations/${conversationId}/commands`, { command: `cat ../canary.txt; touch ${marker}`, cwd: payload });
      const body = response.json();
      if (![400, 403, 404].includes(response.status) || typeof body.error !== 'string' || leaked(response.text)) wrong.push(`${JSON.stringify(payload)} → ${response.status} ${response.text.slice(0, 160)}`);
    }
    expect(wrong).toEqual([]);
    expect(fs.existsSync(marker)).toBe(false);
    expect(await fixture.outsideSnapshot()).toBe(outsideBefore);
    await fixture.assertDecoysIntact();
    // Positive control: a cwd inside the workdir works.
    const inside = await api.post(`/conversations/${conversationId}/commands`, { command: 'pwd', cwd: 'src' });
    expect(inside.json().stdout.trim()).toBe(path.join(fixture.workdir, 'src'));
  });

  it("refuses every payload in the agent's file tools (called by the LLM in a run), and touches nothing", async () => {
    const outsideBefore = await fixture.outsideSnapshot();
    const insideBefore = workdirSnapshot();
    // Per payload, one LLM answer calling every path-taking tool with it.
    const pathCalls = (payload: string): FakeToolCall[] => [
      { name: 'file_editor', arguments: { command: 'view', path: payload } },
      { name: 'file_editor', arguments: { command: 'create', path: payload, file_text: 'PWNED' } },
      { name: 'file_editor', arguments: { command: 'str_replace', path: payload, old_str: 'CANARY', new_str: 'PWNED' } },
      { name: 'file_editor', arguments: { command: 'insert', path: payload, insert_line: 0, new_str: 'PWNED' } },
      { name: 'file_editor', arguments: { command: 'undo_edit', path: payload } },
      { name: 'glob', arguments: { pattern: '**/*', path: payload } },
      { name: 'grep', arguments: { pattern: 'CANARY|secret|root', path: payload } },
    ];
    // As a pattern or a file filter, a payload may match nothing rather than fail, but finds nothing outside.
    const patternCalls = (payload: string): FakeToolCall[] => [
      { name: 'glob', arguments: { pattern: payload } },
      { name: 'grep', arguments: { pattern: 'CANARY|secret|root', include: payload } },
    ];
    const pathCallIds = new Set<string>();
    let n = 0;
    const turns = fixture.payloads.map((payload) => {
      const calls = [...pathCalls(payload), ...patternCalls(payload)].map((call) => ({ ...call, id: `call_${++n}` }));
      for (const call of calls.slice(0, pathCalls(payload).length)) pathCallIds.add(call.id);
      return { toolCalls: calls };
    });
    llm.setScript([...turns, { text: 'Nothing reachable.' }]);
    const started = await api.post(`/conversations/${conversationId}/messages`, { content: 'Read what lies outside your workdir.' });
    expect(started.status, started.text).toBe(202);
    await until(async () => (await api.get(`/conversations/${conversationId}`)).json().status === 'idle', 'the run to end', 150_000);

    const { events } = await allEvents(api, conversationId);
    const observations = events.filter((event) => event.kind === 'observation' && String(event.tool_call_id).startsWith('call_'));
    expect(observations).toHaveLength(n);
    const wrong = observations
      .filter((event) => leaked(String(event.content)) || (pathCallIds.has(event.tool_call_id!) && event.is_error !== true))
      .map((event) => `${event.tool_name} ${event.tool_call_id} → ${String(event.content).slice(0, 160)}`);
    expect(wrong).toEqual([]);
    expect(llm.violations).toEqual([]);
    expect(llm.requests.some((request) => leaked(JSON.stringify(request.body)))).toBe(false);
    expect(await fixture.outsideSnapshot()).toBe(outsideBefore);
    await fixture.assertDecoysIntact();
    expect(workdirSnapshot()).toEqual(insideBefore);
    expect(fs.readFileSync(fixture.canary, 'utf8')).toBe(CANARY_CONTENT);
  }, 180_000);

  it('refuses workdirs that are relative or reach into the data directory (create and PUT /config)', { timeout: 60_000 }, async () => {
    // PUT /config answers 409 while a run is in progress: wait out the previous test's run, whatever became of that test.
    await until(async () => (await api.get(`/conversations/${conversationId}`)).json().status !== 'running', 'the previous run to end', 30_000);
    const dataDir = fs.realpathSync(server.dataDir);
    fs.symlinkSync(dataDir, path.join(fixture.base, 'link-to-data'));
    const intoData = [
      dataDir, `${dataDir}/`, `${dataDir}/conversations`, `${dataDir}/conversations/${conversationId}`, `${dataDir}/webhooks/new`,
      `${dataDir}/workspaces`, `${dataDir}/workspaces/..`, `${dataDir}/workspaces/../conversations`, `${dataDir}/workspaces/x/../../secret.key`,
      `${path.dirname(dataDir)}/./${path.basename(dataDir)}/conversations`, `${fixture.base}/link-to-data`, `${fixture.base}/link-to-data/conversations/new`,
      '/', path.dirname(dataDir),
    ];
    const relative = fixture.payloads.filter((payload) => !payload.startsWith('/'));
    expect(relative.length).toBeGreaterThan(40);
    const conversationsBefore = fs.readdirSync(path.join(dataDir, 'conversations')).sort();
    const wrong: string[] = [];
    for (const workdir of [...intoData, ...relative]) {
      const created = await api.post('/conversations', { workdir });
      const updated = await api.request('PUT', `/conversations/${conversationId}/config`, { workdir });
      for (const [what, response] of [['create', created], ['config', updated]] as const) {
        if (![400, 422].includes(response.status) || typeof response.json().error !== 'string') wrong.push(`${what} ${JSON.stringify(workdir)} → ${response.status} ${response.text.slice(0, 120)}`);
      }
    }
    expect(wrong).toEqual([]);
    expect(fs.readdirSync(path.join(dataDir, 'conversations')).sort()).toEqual(conversationsBefore);
    expect((await api.get(`/conversations/${conversationId}`)).json().workdir).toBe(fixture.workdir);
  });
});
