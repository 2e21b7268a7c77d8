import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { spawnServer, startServer, tempDir, type SpawnedServer } from '../support/agentd.js';
import { requestJson } from '../support/json-api.js';

const running: SpawnedServer[] = [];
const dataDirs: string[] = [];

function dataDir(prefix: string): string {
  const dir = tempDir(prefix);
  dataDirs.push(dir);
  return dir;
}


/** Every event of a conversation, as the exact JSON text of each item, walking pages. */
async function eventTexts(server: SpawnedServer, id: string): Promise<string[]> {
  const texts: string[] = [];
  let pageId: string | null = null;
  do {
    const page = await requestJson(server, 'GET', `/conversations/${id}/events?limit=1000${pageId ? `&page_id=${pageId}` : ''}`);
    expect(page.status).toBe(200);
    const body = page.body as { items: unknown[]; next_page_id: string | null };
    texts.push(...body.items.map((item) => JSON.stringify(item)));
    pageId = body.next_page_id;
  } while (pageId);
  return texts;
}

async function kill9(server: SpawnedServer): Promise<void> {
  server.child.kill('SIGKILL');
  await server.exited;
  running.splice(running.indexOf(server), 1);
}

async function spawn(dir: string, healthyWithinMs?: number): Promise<SpawnedServer> {
  const server = await spawnServer({ dataDir: dir, ...(healthyWithinMs ? { healthyWithinMs } : {}) });
  running.push(server);
  return server;
}

afterEach(async () => {
  for (const server of running.splice(0)) {
    server.child.kill('SIGKILL');
    await server.exited;
  }
  for (const dir of dataDirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

describe('restart after kill -9', () => {
  it('brings back every conversation and every event byte-identical, including those acknowledged mid-burst', { timeout: 120_000 }, async () => {
    const dir = dataDir('agentd-restart-');
    const first = await spawn(dir);

    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const created = await requestJson(first, 'POST', '/conversations', {
        title: `conversation ${i}`,
        metadata: { n: i },
        llm: { model: 'some-model', api_key: `sk-${i}-secret`, temperature: 0.3 },
        ...(i === 0 ? {} : { initial_message: `first message of ${i}`, run: false }),
      });
      expect(created.status).toBe(201);
      ids.push(created.body.id);
    }
    for (let round = 0; round < 15; round++) {
      for (const id of ids.slice(1)) expect((await requestJson(first, 'POST', `/conversations/${id}/messages`, { content: `round ${round} ✓ "quoted" \n newline`, run: false })).status).toBe(202);
    }
    await requestJson(first, 'PUT', `/conversations/${ids[2]}/config`, { title: 'renamed', llm: { temperature: 0.9 } });

    const conversationsBefore = await Promise.all(ids.map(async (id) => (await requestJson(first, 'GET', `/conversations/${id}`)).text));
    const eventsBefore = await Promise.all(ids.map((id) => eventTexts(first, id)));
    const listBefore = (await requestJson(first, 'GET', '/conversations?limit=1000&sort=updated_at')).text;

    // A burst of appends to a fifth conversation, killed while requests are in flight.
    const burstId = (await requestJson(first, 'POST', '/conversations', { title: 'burst' })).body.id as string;
    const acknowledged: unknown[] = [];
    let stop = false;
    let attempted = 0;
    const workers = Array.from({ length: 6 }, async () => {
      while (!stop) {
        attempted += 1;
        try {
          const response = await requestJson(first, 'POST', `/conversations/${burstId}/messages`, { content: `burst ${attempted}`, run: false });
          if (response.status === 202) acknowledged.push(response.body.event);
        } catch {
          return; // the server is gone
        }
      }
    });
    while (acknowledged.length < 150) await new Promise((resolve) => setTimeout(resolve, 5));
    await kill9(first);
    stop = true;
    await Promise.all(workers);
    expect(attempted).toBeGreaterThan(acknowledged.length);

    const second = await spawn(dir);
    expect(await Promise.all(ids.map(async (id) => (await requestJson(second, 'GET', `/conversations/${id}`)).text))).toEqual(conversationsBefore);
    expect(await Promise.all(ids.map((id) => eventTexts(second, id)))).toEqual(eventsBefore);

    const burst = (await eventTexts(second, burstId)).map((text) => JSON.parse(text) as { seq: number; id: string; timestamp: string });
    expect(burst.map((event) => event.seq)).toEqual(Array.from({ length: burst.length }, (_, i) => i + 1));
    expect(burst.length).toBeGreaterThanOrEqual(acknowledged.length);
    const byId = new Map(burst.map((event) => [event.id, event]));
    for (const event of acknowledged as { id: string }[]) expect(byId.get(event.id)).toEqual(event);
    const burstConversation = (await requestJson(second, 'GET', `/conversations/${burstId}`)).body;
    expect(burstConversation.event_count).toBe(burst.length);
    expect(burstConversation.updated_at).toBe(burst.at(-1)!.timestamp);

    // The list order (by updated_at) is the same too, and appends continue the seqs.
    const listAfter = JSON.parse((await requestJson(second, 'GET', '/conversations?limit=1000&sort=updated_at')).text);
    expect(listAfter.items.filter((c: { id: string }) => c.id !== burstId)).toEqual(JSON.parse(listBefore).items);
    const next = await requestJson(second, 'POST', `/conversations/${burstId}/messages`, { content: 'after restart', run: false });
    expect(next.body.event.seq).toBe(burst.length + 1);

    // A second kill -9 with nothing in flight changes nothing.
    const eventsAfter = await Promise.all([...ids, burstId].map((id) => eventTexts(second, id)));
    await kill9(second);
    const third = await spawn(dir);
    expect(await Promise.all([...ids, burstId].map((id) => eventTexts(third, id)))).toEqual(eventsAfter);
  });
});

describe('start-up with thousands of conversations', () => {
  it('comes up and serves them all', { timeout: 180_000 }, async () => {
    const dir = dataDir('agentd-many-');
    const seed = await startServer({ dataDir: dir, listen: false });
    const { conversations } = seed.services;
    let withEvents = '';
    for (let i = 0; i < 3000; i++) {
      const { conversation, record } = await conversations.create({ max_iterations_per_run: 500, confirmation_mode: false, title: `c${i}` });
      if (i % 500 === 0) {
        withEvents = conversation.id;
        conversations.append(conversation.id, { kind: 'message', source: 'user', role: 'user', content: `hello ${i}` });
      }
      if (i % 10 === 0) seed.services.store.setStatus(record.id, 'finished');
    }
    await seed.close();
    expect(fs.readdirSync(`${dir}/conversations`).length).toBe(3000);

    // Reading 3,000 conversations at start-up: seconds alone, far longer on a loaded machine.
    const server = await spawn(dir, 150_000);
    expect((await requestJson(server, 'GET', '/conversations/count')).body).toEqual({ count: 3000 });
    expect((await requestJson(server, 'GET', '/conversations/count?status=finished')).body).toEqual({ count: 300 });
    const info = (await requestJson(server, 'GET', '/info')).body;
    expect(info.conversations).toMatchObject({ total: 3000, by_status: { idle: 2700, finished: 300 } });
    expect((await requestJson(server, 'GET', `/conversations/${withEvents}`)).body.event_count).toBe(1);
    expect((await requestJson(server, 'GET', '/conversations?limit=1000')).body.items).toHaveLength(1000);
  });
});

describe('start-up after a clean shutdown', () => {
  /** The event logs a server process holds open (from /proc: what it opened, not what it says). */
  function openLogs(server: SpawnedServer): string[] {
    const dir = `/proc/${server.child.pid}/fd`;
    return fs.readdirSync(dir).flatMap((fd) => {
      try {
        const target = fs.readlinkSync(`${dir}/${fd}`);
        return target.endsWith('events.jsonl') || target.endsWith('events.idx') ? [target] : [];
      } catch {
        return [];
      }
    });
  }

  it('opens no event log: each conversation comes back from its saved summary; after a crash only the logs changed since are read', { timeout: 60_000 }, async () => {
    const dir = dataDir('agentd-summaries-');
    const first = await spawn(dir);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const created = (await requestJson(first, 'POST', '/conversations', { title: `s${i}`, initial_message: 'hello', run: false })).body as { id: string };
      ids.push(created.id);
      for (let j = 0; j <= i; j++) expect((await requestJson(first, 'POST', `/conversations/${created.id}/messages`, { content: `m${j}`, run: false })).status).toBe(202);
    }
    const before = await Promise.all(ids.map(async (id) => (await requestJson(first, 'GET', `/conversations/${id}`)).body as { event_count: number; updated_at: string }));
    expect(before.map((c) => c.event_count)).toEqual([2, 3, 4]);
    expect(openLogs(first).length).toBeGreaterThan(0);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    running.splice(running.indexOf(first), 1);
    expect(fs.existsSync(`${dir}/summaries.json`)).toBe(true);

    const second = await spawn(dir);
    expect(openLogs(second), 'start-up opened no log').toEqual([]);
    // Taken at start-up: a crash from now on cannot leave stale summaries behind.
    expect(fs.existsSync(`${dir}/summaries.json`)).toBe(false);
    const after = await Promise.all(ids.map(async (id) => (await requestJson(second, 'GET', `/conversations/${id}`)).body as { event_count: number; updated_at: string }));
    expect(after.map((c) => [c.event_count, c.updated_at])).toEqual(before.map((c) => [c.event_count, c.updated_at]));
    expect((await requestJson(second, 'POST', `/conversations/${ids[0]}/messages`, { content: 'later', run: false })).body).toMatchObject({ event: { seq: 3 } });
    await kill9(second);

    const third = await spawn(dir);
    // After the crash: only the log appended to since the clean shutdown was read; the others' summaries came from the snapshot (their logs unchanged).
    expect(new Set(openLogs(third).map((file) => path.basename(path.dirname(file)))), 'start-up after a crash opened only the changed log').toEqual(new Set([ids[0]]));
    const counts = await Promise.all(ids.map(async (id) => ((await requestJson(third, 'GET', `/conversations/${id}`)).body as { event_count: number }).event_count));
    expect(counts).toEqual([3, 3, 4]);
  });

  it('brings every record back from the snapshot of a clean shutdown; after a kill -9 the changed ones from their files, nothing stale', { timeout: 60_000 }, async () => {
    const dir = dataDir('agentd-snapshot-');
    const first = await spawn(dir);
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const created = await requestJson(first, 'POST', '/conversations', { title: `r${i}`, llm: { model: 'm', api_key: `sk-snapshot-${i}` }, secrets: { TOKEN: `snapshot-secret-${i}` }, metadata: { n: String(i) }, initial_message: 'hi', run: false });
      expect(created.status).toBe(201);
      ids.push(created.body.id);
    }
    expect((await requestJson(first, 'PUT', `/conversations/${ids[1]}/config`, { title: 'renamed' })).status).toBe(200);
    const shown = async (server: SpawnedServer) => Promise.all(ids.map(async (id) => (await requestJson(server, 'GET', `/conversations/${id}`)).body));
    const secretNames = async (server: SpawnedServer) => Promise.all(ids.map(async (id) => (await requestJson(server, 'GET', `/conversations/${id}/secrets`)).body));
    const before = await shown(first);
    const namesBefore = await secretNames(first);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    running.splice(running.indexOf(first), 1);
    const snapshot = fs.readFileSync(`${dir}/conversations.snapshot`);
    for (let i = 0; i < 3; i++) for (const secret of [`sk-snapshot-${i}`, `snapshot-secret-${i}`]) expect(snapshot.includes(secret), 'no secret in clear').toBe(false);

    const second = await spawn(dir);
    expect(fs.existsSync(`${dir}/conversations.snapshot`), 'kept at start-up (a cache, checked entry by entry)').toBe(true);
    expect(await shown(second)).toEqual(before);
    expect(await secretNames(second)).toEqual(namesBefore);
    // The secrets came back in plain text in memory: a command sees the value, its output masks it.
    const command = await requestJson(second, 'POST', `/conversations/${ids[2]}/commands`, { command: 'test "$TOKEN" = snapshot-secret-2 && echo same' });
    expect(command.status).toBe(200);
    expect(command.body).toMatchObject({ exit_code: 0, stdout: 'same\n' });
    expect((await requestJson(second, 'PUT', `/conversations/${ids[0]}/config`, { title: 'after the snapshot' })).status).toBe(200);
    await kill9(second);

    const third = await spawn(dir);
    const after = await shown(third);
    expect(after.map((c: { title: string }) => c.title)).toEqual(['after the snapshot', 'renamed', 'r2']);
  });
});
