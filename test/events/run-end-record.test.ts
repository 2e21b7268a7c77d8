import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { spawnServer, tempDir, type SpawnedServer } from '../support/agentd.js';
import { requestJson } from '../support/json-api.js';

const running: SpawnedServer[] = [];
const dataDirs: string[] = [];
let fake: FakeLlm | undefined;

afterEach(async () => {
  for (const server of running.splice(0)) {
    server.child.kill('SIGKILL');
    await server.exited;
  }
  await fake?.close();
  fake = undefined;
  for (const dir of dataDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

const api = (server: SpawnedServer, method: string, url: string, body?: unknown) => requestJson(server.url, method, url, body);

async function spawn(dir: string): Promise<SpawnedServer> {
  const server = await spawnServer({ dataDir: dir });
  running.push(server);
  return server;
}

async function stop(server: SpawnedServer, signal: 'SIGKILL' | 'SIGTERM'): Promise<void> {
  server.child.kill(signal);
  await server.exited;
  running.splice(running.indexOf(server), 1);
}

interface Shown {
  status: string;
  updated_at: string;
  usage: { prompt_tokens: number; completion_tokens: number; cost: number };
  event_count: number;
}

/** One message and its run (a tool call, then an answer), until the conversation is idle again. */
async function runTurn(server: SpawnedServer, id: string, turn: number): Promise<Shown> {
  fake!.setScript([
    { toolCalls: [{ name: 'bash', arguments: { command: `echo ${turn}` } }], usage: { prompt_tokens: 100 * turn, completion_tokens: 7 } },
    { text: `done ${turn}`, usage: { prompt_tokens: 100 * turn + 1, completion_tokens: 3 } },
  ]);
  expect((await api(server, 'POST', `/conversations/${id}/messages`, { content: `turn ${turn}`, run: true })).status).toBe(202);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const shown = (await api(server, 'GET', `/conversations/${id}`)).body as Shown;
    if (shown.status === 'idle' && shown.event_count > 0 && shown.usage.completion_tokens >= 10 * turn) return shown;
    if (Date.now() > deadline) throw new Error(`the run did not end: ${JSON.stringify(shown)}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('the end of a run that leaves the status as the record file has it', () => {
  it('saves no record, and the usage and updated_at come back right after kill -9, after a clean stop, and after kill -9 once more', { timeout: 120_000 }, async () => {
    fake = await startFakeLlm({ whenExhausted: { text: 'done' } });
    const dir = tempDir('agentd-run-end-');
    dataDirs.push(dir);
    let server = await spawn(dir);
    // No project settings: their rules are kept with the record as the first run starts, a save of its own.
    // A title: an untitled conversation is saved once more when its first message names it.
    const created = await api(server, 'POST', '/conversations', { title: 'run end', llm: { model: 'fake-model', base_url: fake.url, api_key: 'sk-run-end' }, setting_sources: [] });
    expect(created.status).toBe(201);
    const id = (created.body as { id: string }).id;
    const file = path.join(dir, 'conversations', id, 'conversation.json');
    const expectShown = async (expected: Shown) => {
      const shown = (await api(server, 'GET', `/conversations/${id}`)).body as Shown;
      expect({ status: shown.status, updated_at: shown.updated_at, usage: shown.usage, event_count: shown.event_count }).toEqual({ status: expected.status, updated_at: expected.updated_at, usage: expected.usage, event_count: expected.event_count });
    };

    // The first run: its end is `idle`, as the file says since the conversation was created.
    const fileBefore = fs.readFileSync(file, 'utf8');
    const first = await runTurn(server, id, 1);
    expect(first.usage).toMatchObject({ prompt_tokens: 201, completion_tokens: 10 });
    expect(fs.readFileSync(file, 'utf8'), 'no save at the run end').toBe(fileBefore);
    expect((JSON.parse(fileBefore) as Shown).usage.prompt_tokens).toBe(0);

    await stop(server, 'SIGKILL');
    server = await spawn(dir);
    await expectShown(first);

    // Loaded at start-up, its record file as it was: the run's end saves nothing either.
    const second = await runTurn(server, id, 2);
    expect(second.usage).toMatchObject({ prompt_tokens: 201 + 401, completion_tokens: 20 });
    expect(fs.readFileSync(file, 'utf8'), 'no save at the run end after a restart').toBe(fileBefore);
    await stop(server, 'SIGTERM');
    server = await spawn(dir);
    await expectShown(second);

    // Loaded from the snapshot of the clean stop: the same.
    const third = await runTurn(server, id, 3);
    expect(fs.readFileSync(file, 'utf8'), 'no save at the run end after a clean stop').toBe(fileBefore);
    await stop(server, 'SIGKILL');
    server = await spawn(dir);
    await expectShown(third);
    expect(third.usage).toMatchObject({ prompt_tokens: 201 + 401 + 601, completion_tokens: 30 });
  });

  it('saves a record changed during the run once, with the status before the run, and not again at its end', { timeout: 120_000 }, async () => {
    fake = await startFakeLlm({ whenExhausted: { text: 'done' } });
    const dir = tempDir('agentd-run-end-');
    dataDirs.push(dir);
    let server = await spawn(dir);
    // Untitled, with the project's settings read: the first message names it, the run keeps the project's rules as it starts (a save during the run).
    const created = await api(server, 'POST', '/conversations', { llm: { model: 'fake-model', base_url: fake.url, api_key: 'sk-run-end' } });
    expect(created.status).toBe(201);
    const id = (created.body as { id: string }).id;
    const file = path.join(dir, 'conversations', id, 'conversation.json');

    const first = await runTurn(server, id, 1);
    const saved = JSON.parse(fs.readFileSync(file, 'utf8')) as { status: string; current_run_id: string | null; title: string | null; project_permissions?: unknown; updated_at: string };
    expect(saved).toMatchObject({ status: 'idle', current_run_id: null, title: 'turn 1', project_permissions: { ask: [], deny: [] } });
    // Saved as the run started, before the answer: the run's end (after the answer) wrote nothing.
    const events = (await api(server, 'GET', `/conversations/${id}/events?kind=message&order=desc&limit=1`)).body as { items: { source: string; timestamp: string }[] };
    expect(events.items[0]!.source).toBe('agent');
    expect(saved.updated_at < events.items[0]!.timestamp, `saved at ${saved.updated_at}, answered at ${events.items[0]!.timestamp}`).toBe(true);

    await stop(server, 'SIGKILL');
    server = await spawn(dir);
    const shown = (await api(server, 'GET', `/conversations/${id}`)).body as Shown & { title: string };
    expect({ status: shown.status, title: shown.title, usage: shown.usage, event_count: shown.event_count }).toEqual({ status: 'idle', title: 'turn 1', usage: first.usage, event_count: first.event_count });
  });
});
