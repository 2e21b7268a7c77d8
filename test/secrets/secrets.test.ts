import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { fetchWithKey } from '../support/json-api.js';

let harness: AgentHarness;
afterEach(async () => harness?.close());

function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true, recursive: true }).filter((entry) => entry.isFile()).map((entry) => path.join(entry.parentPath, entry.name));
}

describe('secrets', () => {
  it('lists names only, merges, deletes, and masks values everywhere they could surface', async () => {
    const value = `s3cr3t-${randomBytes(12).toString('hex')}`;
    harness = await startAgentHarness([
      { toolCalls: [{ name: 'file_editor', arguments: { command: 'view', path: 'leak.txt' } }] },
      { text: `I saw ${value} in the file` },
    ]);
    const id = await harness.createConversation({ secrets: { API_TOKEN: value } });
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir;
    fs.writeFileSync(path.join(workdir, 'leak.txt'), `token=${value}\n`);

    expect((await harness.get(`/conversations/${id}/secrets`)).body).toEqual({ names: ['API_TOKEN'] });
    const put = await fetch(`${harness.server.url}/conversations/${id}/secrets`, {
      method: 'PUT',
      headers: { ...harness.server.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ secrets: { OTHER: 'other-value-123' } }),
    });
    expect(await put.json()).toEqual({ names: ['API_TOKEN', 'OTHER'] });

    await harness.post(`/conversations/${id}/messages`, { content: `please use ${value}` });
    await harness.waitForStatus(id, ['idle', 'error']);

    const events = await harness.events(id);
    const eventsText = JSON.stringify(events);
    expect(eventsText).not.toContain(value);
    expect(eventsText).toContain('<secret:API_TOKEN>');
    expect(events.find((event) => event.kind === 'observation').content).toContain('token=<secret:API_TOKEN>');
    expect(JSON.stringify(harness.llm.requests.map((request) => request.body))).not.toContain(value);

    for (const file of filesUnder(harness.server.dataDir)) {
      if (file.startsWith(workdir)) continue;
      expect(fs.readFileSync(file).includes(value), file).toBe(false);
    }

    const removed = await fetch(`${harness.server.url}/conversations/${id}/secrets/OTHER`, { method: 'DELETE', headers: harness.server.auth });
    expect(removed.status).toBe(204);
    expect((await harness.get(`/conversations/${id}/secrets`)).body).toEqual({ names: ['API_TOKEN'] });
    // Never set, including names every plain object inherits: 404, and nothing else goes.
    for (const name of ['NOPE', 'toString', 'constructor', 'hasOwnProperty', '__proto__']) {
      const missing = await fetch(`${harness.server.url}/conversations/${id}/secrets/${name}`, { method: 'DELETE', headers: harness.server.auth });
      expect(missing.status, name).toBe(404);
      expect(await missing.json(), name).toMatchObject({ error: 'secret_not_found' });
    }
    expect((await harness.get(`/conversations/${id}/secrets`)).body).toEqual({ names: ['API_TOKEN'] });
  });

  it('refuses a secret named __proto__ (it would be silently dropped) on create and on PUT', async () => {
    harness = await startAgentHarness();
    const json = { ...harness.server.auth, 'content-type': 'application/json' };
    // The raw JSON text: JSON.stringify of an object literal cannot carry an own __proto__ key.
    const put = await fetch(`${harness.server.url}/conversations/${await harness.createConversation()}/secrets`, { method: 'PUT', headers: json, body: '{"secrets": {"__proto__": "hidden-value-1", "FINE": "v"}}' });
    expect(put.status).toBe(400);
    expect(await put.json()).toMatchObject({ error: 'invalid_json', message: expect.stringContaining('__proto__') });
    // Spelled with escapes, it is the same key once parsed.
    const created = await fetch(`${harness.server.url}/conversations`, { method: 'POST', headers: json, body: '{"secrets": {"\\u005f_proto__": "hidden-value-2"}}' });
    expect(created.status).toBe(400);
    expect(await created.json()).toMatchObject({ error: 'invalid_json' });
  });

  it('rejects invalid secret names and keeps secrets across a restart', async () => {
    harness = await startAgentHarness();
    const id = await harness.createConversation();
    const bad = await fetch(`${harness.server.url}/conversations/${id}/secrets`, {
      method: 'PUT',
      headers: { ...harness.server.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ secrets: { 'not-a-name': 'x' } }),
    });
    expect(bad.status).toBe(400);
    await fetch(`${harness.server.url}/conversations/${id}/secrets`, {
      method: 'PUT',
      headers: { ...harness.server.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ secrets: { KEEP_ME: 'value-kept-1' } }),
    });
    const dataDir = harness.server.dataDir;
    await harness.server.close();
    const { startServer } = await import('../support/agentd.js');
    const again = await startServer({ dataDir });
    try {
      expect(again.services.secrets.names(id)).toEqual(['KEEP_ME']);
      expect(again.services.store.record(id).secrets.KEEP_ME).toBe('value-kept-1');
    } finally {
      await again.close();
      harness.server.close = async () => {};
    }
  });
});

describe('secret values in file names', () => {
  it('are masked in listings, searches, mkdir and upload answers', async () => {
    const value = `s3cr3t-${randomBytes(12).toString('hex')}`;
    harness = await startAgentHarness();
    const id = await harness.createConversation({ secrets: { API_TOKEN: value } });
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir;
    fs.mkdirSync(path.join(workdir, 'dir'));
    fs.writeFileSync(path.join(workdir, 'dir', `key-${value}.txt`), 'x');
    const call = async (method: string, route: string, body?: FormData) => {
      const response = await fetchWithKey(harness.server, `/conversations/${id}${route}`, { method, ...(body ? { body } : {}) });
      return { status: response.status, text: await response.text() };
    };
    const form = new FormData();
    form.append('file', new Blob(['y']), `upload-${value}.txt`);
    const answers = [
      await call('GET', '/files?path=dir'),
      await call('GET', '/files?recursive=true'),
      await call('GET', `/files-search?pattern=${encodeURIComponent('**/*.txt')}`),
      await call('POST', `/dirs/made-${value}`),
      await call('POST', '/files/upload?path=dir', form),
    ];
    for (const answer of answers) {
      expect(answer.status).toBeLessThan(300);
      expect(answer.text).not.toContain(value);
      expect(answer.text).toContain('<secret:API_TOKEN>');
    }
    // The files themselves keep their real names.
    expect(fs.readdirSync(path.join(workdir, 'dir')).sort()).toEqual([`key-${value}.txt`, `upload-${value}.txt`]);
  });
});
