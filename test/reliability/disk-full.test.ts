/**
 * Disk full: the data dir (workdirs included) is a 2 MB tmpfs the test mounts inside its own temp dir (skipped with
 * one line where mounting is not permitted). A real server fills it up: requests that write get
 * 507 `insufficient_storage`, a run whose events no longer fit ends in `error` (the server keeps
 * serving), /health turns 503, nothing written before is damaged (a partial append is cut back),
 * and once space is freed the server takes writes again by itself; a restart finds every event.
 */
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { spawnServer, tempDir, TEST_KEY, type SpawnedServer } from '../support/agentd.js';
import { requestJson } from '../support/json-api.js';
import { until } from '../support/reliability.js';
import { fillFilesystem } from '../support/fill-filesystem.js';

const auth = { authorization: `Bearer ${TEST_KEY}` };
let root: string;
let dataDir: string;
let mounted = false;
let mountError = '';
let llm: FakeLlm;
const servers: SpawnedServer[] = [];

const api = (server: SpawnedServer, method: string, url: string, body?: unknown) => requestJson(server.url, method, url, body);


async function allEvents(server: SpawnedServer, id: string): Promise<string[]> {
  const page = await api(server, 'GET', `/conversations/${id}/events?limit=1000`);
  expect(page.status).toBe(200);
  return (page.body.items as unknown[]).map((item) => JSON.stringify(item));
}

beforeAll(async () => {
  root = tempDir('agentd-disk-full-');
  dataDir = path.join(root, 'data');
  fs.mkdirSync(dataDir);
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m,mode=0700', 'tmpfs', dataDir], { stdio: 'pipe' });
    mounted = true;
  } catch (error) {
    mountError = String((error as { stderr?: Buffer }).stderr ?? error).trim();
  }
  llm = await startFakeLlm({ script: [] });
});

afterAll(async () => {
  // SIGTERM first: a graceful stop also ends the agent's shells, which would keep the mount busy.
  for (const server of servers) {
    server.child.kill('SIGTERM');
    const forced = setTimeout(() => server.child.kill('SIGKILL'), 10_000);
    await server.exited;
    clearTimeout(forced);
  }
  await llm?.close();
  // Lazy: detached now even if something still has a file open there.
  if (mounted) execFileSync('umount', ['--lazy', dataDir]);
  fs.rmSync(root, { recursive: true, force: true });
});

describe('disk full', () => {
  it('refuses writes with 507, ends the run, keeps what was written, and recovers when space is freed', { timeout: 120_000 }, async (context) => {
    if (!mounted) {
      console.log(`disk-full test skipped: cannot mount a tmpfs here (${mountError})`);
      context.skip();
    }
    // Workdirs on the same disk (the default base, inside the data dir).
    const env = { AGENTD_WORKDIR_BASE: path.join(dataDir, 'workspaces') };
    const server = await spawnServer({ dataDir, env });
    servers.push(server);
    const llmConfig = { model: 'fake', base_url: llm.url, api_key: 'sk-test' };
    const chat = (await api(server, 'POST', '/conversations', { title: 'chat', initial_message: 'one', run: false })).body.id as string;
    for (const content of ['two', 'three']) expect((await api(server, 'POST', `/conversations/${chat}/messages`, { content, run: false })).status).toBe(202);
    const agent = (await api(server, 'POST', '/conversations', { title: 'agent', llm: llmConfig })).body;

    // The agent's tool waits for the disk to be full, then prints more than fits. Should its
    // observation be short after all (seen twice in full suites: 425 bytes, which the last page of
    // the log file could still hold), the LLM's answer to it does not fit either.
    llm.push({ toolCalls: [{ name: 'bash', arguments: { command: 'while [ ! -e filled ]; do sleep 0.05; done; seq 1 30000' } }] }, { text: 'y'.repeat(64 * 1024) });
    expect((await api(server, 'POST', `/conversations/${agent.id}/messages`, { content: 'work', run: true })).status).toBe(202);
    await until(async () => (await allEvents(server, agent.id)).some((text) => JSON.parse(text).kind === 'action'), 'the bash call', 30_000);

    const chatBefore = await allEvents(server, chat);
    const agentBefore = await allEvents(server, agent.id);
    const chatLog = path.join(dataDir, 'conversations', chat, 'events.jsonl');
    const chatLogBefore = fs.readFileSync(chatLog);
    fillFilesystem(path.join(dataDir, 'filler'));
    fs.writeFileSync(path.join(agent.workdir, 'filled'), '');

    // The run ends (its observation, or the answer to it, does not fit); the server keeps serving.
    await until(async () => (await api(server, 'GET', `/conversations/${agent.id}`)).body.status !== 'running', 'the run to end', 30_000);
    // The long answer, when the run ended before asking for it, is not the next run's.
    llm.setScript([]);
    // Should it not end in error, the events since the bash call say why.
    const ended = (await api(server, 'GET', `/conversations/${agent.id}`)).body.status;
    const since = (await allEvents(server, agent.id)).slice(agentBefore.length).map((text) => {
      const event = JSON.parse(text);
      return { kind: event.kind, bytes: text.length, status: event.status, error: event.error };
    });
    const free = fs.statfsSync(dataDir);
    expect(ended, `the agent's events since the bash call: ${JSON.stringify(since)}; ${free.bavail * free.bsize} bytes free now`).toBe('error');
    expect((await fetch(`${server.url}/alive`)).status).toBe(200);

    // Requests that write: 507 in the error shape. Reads still work.
    const refused = await api(server, 'POST', `/conversations/${chat}/messages`, { content: 'x'.repeat(20_000), run: false });
    expect(refused.status).toBe(507);
    expect(refused.body).toEqual({ error: 'insufficient_storage', message: expect.stringContaining('out of disk space'), details: null });
    const created = await api(server, 'POST', '/conversations', { title: 'no room' });
    expect(created.status).toBe(507);
    expect(created.body.error).toBe('insufficient_storage');
    expect((await api(server, 'GET', '/conversations?limit=10')).body.items).toHaveLength(2);
    // A workdir on the same full disk: an upload is a 507 too, not a 500.
    const form = new FormData();
    form.append('file', new Blob([Buffer.alloc(100_000, 0x61)]), 'big.txt');
    const upload = await fetch(`${server.url}/conversations/${chat}/files/upload`, { method: 'POST', headers: auth, body: form });
    expect(upload.status).toBe(507);
    expect(((await upload.json()) as { error: string }).error).toBe('insufficient_storage');
    const health = await fetch(`${server.url}/health`);
    expect(health.status).toBe(503);
    expect(((await health.json()) as { checks: { data_dir_writable: { ok: boolean; detail: string } } }).checks.data_dir_writable).toMatchObject({ ok: false, detail: expect.stringContaining('ENOSPC') });

    // Nothing written before was touched: no partial line left behind.
    expect(fs.readFileSync(chatLog)).toEqual(chatLogBefore);
    expect(await allEvents(server, chat)).toEqual(chatBefore);
    expect((await allEvents(server, agent.id)).slice(0, agentBefore.length)).toEqual(agentBefore);

    // Space freed: the server takes writes again by itself.
    fs.rmSync(path.join(dataDir, 'filler'));
    await until(async () => (await fetch(`${server.url}/health`)).status === 200, '/health to recover', 30_000);
    const appended = await api(server, 'POST', `/conversations/${chat}/messages`, { content: 'x'.repeat(20_000), run: false });
    expect(appended.status).toBe(202);
    expect(appended.body.event.seq).toBe(chatBefore.length + 1);
    llm.push({ text: 'Recovered.' });
    expect((await api(server, 'POST', `/conversations/${agent.id}/messages`, { content: 'again', run: true })).status).toBe(202);
    await until(async () => (await api(server, 'GET', `/conversations/${agent.id}`)).body.status === 'idle', 'the new run to complete', 30_000);

    // A restart finds every event, gapless, and nothing damaged.
    const chatAfter = await allEvents(server, chat);
    const agentAfter = await allEvents(server, agent.id);
    server.child.kill('SIGTERM');
    await server.exited;
    servers.splice(servers.indexOf(server), 1);
    const restarted = await spawnServer({ dataDir, env });
    servers.push(restarted);
    expect(await allEvents(restarted, chat)).toEqual(chatAfter);
    expect(await allEvents(restarted, agent.id)).toEqual(agentAfter);
    const seqs = agentAfter.map((text) => JSON.parse(text).seq as number);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    const report = (await (await fetch(`${restarted.url}/health`)).json()) as { status: string };
    expect(report.status).toBe('ok');
  });
});
