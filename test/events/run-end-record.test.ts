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

const watchers: fs.FSWatcher[] = [];
afterEach(() => {
  for (const watcher of watchers.splice(0)) watcher.close();
});

/**
 * Counts the saves of a record file from now on: each is a rename onto it (writeFileAtomic), which
 * inotify reports in the order it happened. `count` makes and removes a marker beside the file:
 * once the marker is reported, every save before it was too.
 */
function watchSaves(file: string): { count(): Promise<number> } {
  const dir = path.dirname(file);
  let saves = 0;
  const markers = new Map<string, () => void>();
  watchers.push(
    fs.watch(dir, (_type, name) => {
      if (name === path.basename(file)) saves += 1;
      else if (name) markers.get(name)?.();
    }),
  );
  let next = 0;
  return {
    async count() {
      const marker = `.saves-marker-${next++}`;
      const seen = new Promise<void>((resolve) => markers.set(marker, resolve));
      fs.writeFileSync(path.join(dir, marker), '');
      fs.rmSync(path.join(dir, marker));
      await seen;
      markers.delete(marker);
      return saves;
    },
  };
}

async function waitUntil(what: string, done: () => boolean | Promise<boolean>): Promise<void> {
  for (const deadline = Date.now() + 30_000; !(await done()); await new Promise((resolve) => setTimeout(resolve, 20))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
  }
}

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

describe("a new conversation's first message: its title and the project's rules in one save", () => {
  const llm = () => ({ llm: { model: 'fake-model', base_url: fake!.url, api_key: 'sk-run-end' } });
  const bash = (command: string) => ({ toolCalls: [{ name: 'bash', arguments: { command } }] });
  type Saved = { status: string; title: string | null; project_permissions?: unknown };

  /** A fake LLM answering `done`, a server on a data dir of its own and a conversation on it, with its record's file. */
  async function serverWithConversation() {
    fake = await startFakeLlm({ whenExhausted: { text: 'done' } });
    const dir = tempDir('agentd-first-save-');
    dataDirs.push(dir);
    const server = await spawn(dir);
    const created = await api(server, 'POST', '/conversations', llm());
    expect(created.status).toBe(201);
    const { id, workdir } = created.body as { id: string; workdir: string };
    return { dir, server, id, workdir, file: path.join(dir, 'conversations', id, 'conversation.json') };
  }

  it('saves the record once, before the 202, then not again; both survive kill -9 during the first tool call', { timeout: 120_000 }, async () => {
    const started = await serverWithConversation();
    const { dir, id, workdir, file } = started;
    let server = started.server;
    const settings = path.join(workdir, '.claude', 'settings.json');
    fs.mkdirSync(path.dirname(settings));
    fs.writeFileSync(settings, JSON.stringify({ permissions: { deny: ['bash(rm -rf*)'] } }));
    fs.mkdirSync(path.join(workdir, 'victim'));
    const saves = watchSaves(file);

    // The first tool call rewrites the project's settings, and is still running when the server is killed.
    fake!.setScript([bash(`echo '{}' > .claude/settings.json && sleep 5`)]);
    expect((await api(server, 'POST', `/conversations/${id}/messages`, { content: 'first\nmore', run: true })).status).toBe(202);
    expect(await saves.count(), 'saves by the 202').toBe(1);
    expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toMatchObject({ status: 'idle', title: 'first', project_permissions: { ask: [], deny: ['bash(rm -rf*)'] } } satisfies Saved);
    await waitUntil('the first tool call rewrote the settings', () => fs.readFileSync(settings, 'utf8').trim() === '{}');
    await stop(server, 'SIGKILL');
    expect(await saves.count(), 'saves in all').toBe(1);

    server = await spawn(dir);
    expect(((await api(server, 'GET', `/conversations/${id}`)).body as Saved).title).toBe('first');
    // The rules kept before the tool call ran, not the file it left, decide the next run.
    fake!.setScript([bash('rm -rf victim'), { text: 'done' }]);
    expect((await api(server, 'POST', `/conversations/${id}/messages`, { content: 'second', run: true })).status).toBe(202);
    await waitUntil('the second run ended', async () => ((await api(server, 'GET', `/conversations/${id}`)).body as Saved).status === 'idle');
    expect(fs.existsSync(path.join(workdir, 'victim'))).toBe(true);
    const rejections = (await api(server, 'GET', `/conversations/${id}/events?kind=rejection`)).body as { items: { rule?: string }[] };
    expect(rejections.items).toMatchObject([{ rule: 'deny: bash(rm -rf*)' }]);
  });

  it('a message without a run saves its title once; the next one, with a run, saves the rules once; a later turn nothing', { timeout: 120_000 }, async () => {
    const started = await serverWithConversation();
    const { dir, id, file } = started;
    let server = started.server;
    let saves = watchSaves(file);

    expect((await api(server, 'POST', `/conversations/${id}/messages`, { content: 'noted', run: false })).status).toBe(202);
    expect(await saves.count()).toBe(1);
    expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toMatchObject({ title: 'noted' });
    expect((JSON.parse(fs.readFileSync(file, 'utf8')) as Saved).project_permissions).toBeUndefined();
    await stop(server, 'SIGKILL');
    server = await spawn(dir);
    expect(((await api(server, 'GET', `/conversations/${id}`)).body as Saved).title).toBe('noted');

    saves = watchSaves(file);
    await runTurn(server, id, 1);
    expect(await saves.count(), 'the first run: its project rules').toBe(1);
    expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toMatchObject({ status: 'idle', title: 'noted', project_permissions: { ask: [], deny: [] } } satisfies Saved);
    await runTurn(server, id, 2);
    expect(await saves.count(), 'a later run').toBe(1);
  });
});
