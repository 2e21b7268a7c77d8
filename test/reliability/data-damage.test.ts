/**
 * Damaged stored data is confined to what it belongs to: a real server is stopped, one file of
 * each kind is damaged in its data dir (a conversation record, a line in the middle of an event
 * log, its index, a run record, a callback's state), and the restarted server serves the rest,
 * quarantines the damaged conversations (status `error`, the damage in GET /conversations/{id},
 * 409 for anything else, their files untouched), rebuilds the index from the log, leaves the
 * callback out, names file and line in its log, and says so in /health (200, `degraded`).
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { freePort, spawnServer, tempDir, type SpawnedServer } from '../support/agentd.js';
import { requestJson } from '../support/json-api.js';
import { until } from '../support/reliability.js';

const env = { AGENTD_WEBHOOK_ALLOW_PRIVATE: 'true' };
let llm: FakeLlm;
let dataDir: string;
const servers: SpawnedServer[] = [];

const api = (server: SpawnedServer, method: string, url: string, body?: unknown) => requestJson(server.url, method, url, body);

/** Stops the servers started so far: one still running may be writing its data dir (its audit log) while the test removes it. */
async function stopServers(): Promise<void> {
  for (const server of servers.splice(0)) {
    if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
    await server.exited;
  }
}


beforeAll(async () => {
  llm = await startFakeLlm({ script: [] });
  dataDir = tempDir('agentd-damage-');
});

afterAll(async () => {
  for (const server of servers) {
    server.child.kill('SIGKILL');
    await server.exited;
  }
  await llm.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('damaged records', () => {
  it('quarantines what is damaged and serves the rest after a restart', { timeout: 90_000 }, async () => {
    const first = await spawnServer({ dataDir, env });
    servers.push(first);
    const ids: Record<'record' | 'events' | 'runs' | 'index' | 'healthy', string> = { record: '', events: '', runs: '', index: '', healthy: '' };
    for (const name of Object.keys(ids) as (keyof typeof ids)[]) {
      const created = await api(first, 'POST', '/conversations', { title: name, llm: { model: 'fake', base_url: llm.url, api_key: 'sk-test' }, initial_message: `${name} 1`, run: false });
      expect(created.status).toBe(201);
      ids[name] = created.body.id;
      for (let i = 2; i <= 6; i++) expect((await api(first, 'POST', `/conversations/${ids[name]}/messages`, { content: `${name} ${i}`, run: false })).status).toBe(202);
    }
    llm.push({ text: 'Done.' });
    expect((await api(first, 'POST', `/conversations/${ids.runs}/messages`, { content: 'go', run: true })).status).toBe(202);
    await until(async () => (await api(first, 'GET', `/conversations/${ids.runs}`)).body.status !== 'running', 'the run to end', 20_000);
    const callback = await api(first, 'POST', `/conversations/${ids.healthy}/callbacks`, { url: `http://127.0.0.1:${await freePort()}/hook` });
    expect(callback.status).toBe(201);
    const indexEventsBefore = (await api(first, 'GET', `/conversations/${ids.index}/events?limit=100`)).body.items;
    first.child.kill('SIGKILL');
    await first.exited;

    const conversationFile = (id: string, name: string) => path.join(dataDir, 'conversations', id, name);
    const callbackFile = path.join(dataDir, 'webhooks', `${callback.body.id}.json`);
    // A record cut short; a line in the middle of a log overwritten (the index still points at it);
    // an index entry zeroed (the log is fine); a garbage line before a run's records; a callback state that is not JSON.
    fs.writeFileSync(conversationFile(ids.record, 'conversation.json'), fs.readFileSync(conversationFile(ids.record, 'conversation.json'), 'utf8').slice(0, 40));
    const lines = fs.readFileSync(conversationFile(ids.events, 'events.jsonl'), 'utf8').split('\n');
    lines[2] = `ror":false${lines[2]!.slice(10)}`;
    fs.writeFileSync(conversationFile(ids.events, 'events.jsonl'), lines.join('\n'));
    // The index holds the entries written before the kill (they are written 128 at a time: none
    // of these six, usually); its second entry zeroed, as far as it reaches, the first's kept.
    const written = fs.readFileSync(conversationFile(ids.index, 'events.idx'));
    const index = Buffer.alloc(Math.max(written.length, 64));
    written.copy(index);
    index.fill(0, 32, 64);
    fs.writeFileSync(conversationFile(ids.index, 'events.idx'), index);
    fs.writeFileSync(conversationFile(ids.runs, 'runs.jsonl'), `{"torn\n${fs.readFileSync(conversationFile(ids.runs, 'runs.jsonl'), 'utf8')}`);
    fs.writeFileSync(callbackFile, 'not json at all');
    const damagedFiles = [
      conversationFile(ids.record, 'conversation.json'),
      conversationFile(ids.events, 'events.jsonl'),
      conversationFile(ids.events, 'events.idx'),
      conversationFile(ids.runs, 'runs.jsonl'),
      conversationFile(ids.runs, 'events.jsonl'),
      conversationFile(ids.runs, 'conversation.json'),
      callbackFile,
    ];
    const damagedBytes = damagedFiles.map((file) => fs.readFileSync(file));

    const second = await spawnServer({ dataDir, env });
    servers.push(second);
    const health = await fetch(`${second.url}/health`);
    expect(health.status).toBe(200);
    const report = (await health.json()) as { status: string; checks: { quarantined: { ok: boolean; conversations: string[]; callbacks: string[] } } };
    expect(report.status).toBe('degraded');
    expect(report.checks.quarantined.ok).toBe(false);
    expect([...report.checks.quarantined.conversations].sort()).toEqual([ids.record, ids.events, ids.runs].sort());
    expect(report.checks.quarantined.callbacks).toEqual([callback.body.id]);

    const record = (await api(second, 'GET', `/conversations/${ids.record}`)).body;
    expect(record.status).toBe('error');
    expect(record.quarantine).toMatchObject({ file: 'conversation.json', line: null, reason: expect.stringContaining('not valid JSON') });
    const events = (await api(second, 'GET', `/conversations/${ids.events}`)).body;
    expect(events).toMatchObject({ status: 'error', title: 'events', quarantine: { file: 'events.jsonl', line: 3 } });
    const runs = (await api(second, 'GET', `/conversations/${ids.runs}`)).body;
    expect(runs).toMatchObject({ status: 'error', title: 'runs', quarantine: { file: 'runs.jsonl', line: 1 } });

    // Everything else about a quarantined conversation is refused in the error shape; nothing is written.
    for (const [method, url, body] of [
      ['GET', `/conversations/${ids.events}/events`],
      ['POST', `/conversations/${ids.events}/messages`, { content: 'more', run: false }],
      ['POST', `/conversations/${ids.runs}/messages`, { content: 'more', run: true }],
      ['PUT', `/conversations/${ids.record}/config`, { title: 'new' }],
      ['GET', `/conversations/${ids.record}/files`],
    ] as const) {
      const refused = await api(second, method, url, body);
      expect(refused.status, `${method} ${url}`).toBe(409);
      expect(refused.body).toMatchObject({ error: 'conversation_quarantined', message: expect.any(String), details: expect.any(Object) });
    }
    expect(damagedFiles.map((file) => fs.readFileSync(file))).toEqual(damagedBytes);

    // The index was rebuilt from the log; the others are served and take writes.
    expect((await api(second, 'GET', `/conversations/${ids.index}/events?limit=100`)).body.items).toEqual(indexEventsBefore);
    expect((await api(second, 'GET', `/conversations/${ids.index}`)).body.quarantine).toBeNull();
    for (const id of [ids.index, ids.healthy]) expect((await api(second, 'POST', `/conversations/${id}/messages`, { content: 'after', run: false })).body.event.seq).toBe(7);
    const listed = (await api(second, 'GET', '/conversations?limit=100')).body.items as { id: string; status: string }[];
    expect(listed).toHaveLength(5);

    // The log names each damaged file and line.
    const output = second.output();
    expect(output).toContain(`${path.join(ids.events, 'events.jsonl')}","line":3`);
    expect(output).toContain(`${path.join(ids.runs, 'runs.jsonl')}","line":1`);
    expect(output).toContain(`${path.join(ids.record, 'conversation.json')}","line":null`);
    expect(output).toContain(`${callback.body.id}.json`);

    // A quarantined conversation can be deleted; then /health is clean of it.
    expect((await api(second, 'DELETE', `/conversations/${ids.record}`)).status).toBe(204);
    const after = (await (await fetch(`${second.url}/health`)).json()) as typeof report;
    expect(after.checks.quarantined.conversations).not.toContain(ids.record);
  });

  it('a log damaged while the server was stopped cleanly is quarantined when it is first read', { timeout: 90_000 }, async () => {
    // A clean stop saves each conversation's summary, so the next start reads no event log: the
    // damage is found on first use, and from then on the conversation is quarantined like at start-up.
    const cleanDir = tempDir('agentd-damage-clean-');
    try {
      const first = await spawnServer({ dataDir: cleanDir, env });
      servers.push(first);
      const [damagedId, healthyId] = await createDamagedAndHealthy(first, 4);
      first.child.kill('SIGTERM');
      await first.exited;
      expect(fs.existsSync(path.join(cleanDir, 'summaries.json'))).toBe(true);
      const logFile = path.join(cleanDir, 'conversations', damagedId, 'events.jsonl');
      const lines = fs.readFileSync(logFile, 'utf8').split('\n');
      lines[1] = `ror":false${lines[1]!.slice(10)}`;
      fs.writeFileSync(logFile, lines.join('\n'));
      const damagedBytes = fs.readFileSync(logFile);

      const second = await spawnServer({ dataDir: cleanDir, env });
      servers.push(second);
      // Nothing is known yet: the log was not read at start-up.
      await expectFoundAtFirstUse(second, { damagedId, healthyId, read: 'events', file: 'events.jsonl', line: 2, damagedFile: logFile, damagedBytes, refused: [{ content: 'more', run: false }], healthySeq: 5 });
    } finally {
      await stopServers();
      fs.rmSync(cleanDir, { recursive: true, force: true });
    }
  });

  it('runs damaged while the server was stopped cleanly are quarantined when first read', { timeout: 90_000 }, async () => {
    // A clean stop ended and recorded every run, so the next start reads no runs.jsonl: the damage
    // is found on first use, and from then on the conversation is quarantined like at start-up.
    const cleanDir = tempDir('agentd-damage-runs-clean-');
    try {
      const first = await spawnServer({ dataDir: cleanDir, env });
      servers.push(first);
      const [damagedId, healthyId] = await createDamagedAndHealthy(first, 1);
      llm.push({ text: 'Done.' });
      expect((await api(first, 'POST', `/conversations/${damagedId}/messages`, { content: 'go', run: true })).status).toBe(202);
      await until(async () => (await api(first, 'GET', `/conversations/${damagedId}`)).body.status !== 'running', 'the run to end', 20_000);
      first.child.kill('SIGTERM');
      await first.exited;
      expect(fs.existsSync(path.join(cleanDir, 'summaries.json'))).toBe(true);
      const runsFile = path.join(cleanDir, 'conversations', damagedId, 'runs.jsonl');
      fs.writeFileSync(runsFile, `{"torn\n${fs.readFileSync(runsFile, 'utf8')}`);
      const damagedBytes = fs.readFileSync(runsFile);

      const second = await spawnServer({ dataDir: cleanDir, env });
      servers.push(second);
      // Nothing is known yet: the runs were not read at start-up.
      await expectFoundAtFirstUse(second, { damagedId, healthyId, read: 'runs', file: 'runs.jsonl', line: 1, damagedFile: runsFile, damagedBytes, refused: [{ content: 'more', run: false }, { content: 'more', run: true }], healthySeq: 2 });
    } finally {
      await stopServers();
      fs.rmSync(cleanDir, { recursive: true, force: true });
    }
  });
});

/** Two conversations titled `damaged` and `healthy`, each with `messages` user messages and no run: their ids. */
async function createDamagedAndHealthy(server: SpawnedServer, messages: number): Promise<[string, string]> {
  const ids: string[] = [];
  for (const title of ['damaged', 'healthy']) {
    const created = await api(server, 'POST', '/conversations', { title, llm: { model: 'fake', base_url: llm.url, api_key: 'sk-test' }, initial_message: `${title} 1`, run: false });
    expect(created.status).toBe(201);
    ids.push(created.body.id);
    for (let i = 2; i <= messages; i++) expect((await api(server, 'POST', `/conversations/${created.body.id}/messages`, { content: `${title} ${i}`, run: false })).status).toBe(202);
  }
  return ids as [string, string];
}

/**
 * A conversation whose `file` was damaged while the server was stopped cleanly: unknown at start-up,
 * found at the first read of `read` (409), quarantined from then on (health, the summary, writes
 * refused, the file untouched, the damage logged), while the healthy one takes writes.
 */
async function expectFoundAtFirstUse(
  server: SpawnedServer,
  expected: { damagedId: string; healthyId: string; read: 'events' | 'runs'; file: string; line: number; damagedFile: string; damagedBytes: Buffer; refused: { content: string; run: boolean }[]; healthySeq: number },
): Promise<void> {
  const { damagedId, healthyId } = expected;
  expect(((await (await fetch(`${server.url}/health`)).json()) as any).checks.quarantined.conversations).toEqual([]);
  const firstRead = await api(server, 'GET', `/conversations/${damagedId}/${expected.read}`);
  expect(firstRead.status).toBe(409);
  expect(firstRead.body).toMatchObject({ error: expect.stringMatching(/^(data_damaged|conversation_quarantined)$/), message: expect.any(String) });
  const health = (await (await fetch(`${server.url}/health`)).json()) as { status: string; checks: { quarantined: { conversations: string[] } } };
  expect(health.status).toBe('degraded');
  expect(health.checks.quarantined.conversations).toEqual([damagedId]);
  expect((await api(server, 'GET', `/conversations/${damagedId}`)).body).toMatchObject({ status: 'error', quarantine: { file: expected.file, line: expected.line } });
  for (const body of expected.refused) {
    const refused = await api(server, 'POST', `/conversations/${damagedId}/messages`, body);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toBe('conversation_quarantined');
  }
  expect(fs.readFileSync(expected.damagedFile)).toEqual(expected.damagedBytes);
  expect(server.output()).toContain(`${path.join(damagedId, expected.file)}","line":${expected.line}`);
  // The other conversation is served and takes writes.
  expect((await api(server, 'POST', `/conversations/${healthyId}/messages`, { content: 'after', run: false })).body.event.seq).toBe(expected.healthySeq);
}
