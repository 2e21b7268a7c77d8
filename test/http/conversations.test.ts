import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, tempDir, TEST_KEY, type TestServer } from '../support/agentd.js';
import { expectError } from '../support/expect-error.js';

const API_KEY = 'sk-test-very-secret-llm-key-7f3a9c';
const ENV_API_KEY = 'sk-env-default-secret-key-51d2e8';
const ALL_TOOLS = ['bash', 'file_editor', 'glob', 'grep', 'task_tracker', 'ask_user', 'web_fetch', 'task', 'skill', 'slash_command', 'finish'];

let server: TestServer;
/** Every response body seen in this file: none may ever contain an API key. */
const bodies: string[] = [];

async function call(method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, payload?: unknown, target: TestServer = server) {
  const response = await target.app.inject({ method, url, headers: target.auth, ...(payload === undefined ? {} : { payload: payload as object }) });
  bodies.push(response.body);
  return { status: response.statusCode, body: response.body === '' ? undefined : response.json() };
}

function allFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    return entry.isDirectory() ? allFiles(full) : [full];
  });
}

beforeAll(async () => {
  server = await startServer({ listen: false });
});
afterAll(async () => {
  for (const body of bodies) {
    expect(body).not.toContain(API_KEY);
    expect(body).not.toContain(ENV_API_KEY);
  }
  await server?.close();
});

describe('POST /conversations', () => {
  it('creates with defaults: a fresh workdir under the workdir base, all tools, no LLM', async () => {
    const { status, body } = await call('POST', '/conversations', {});
    expect(status).toBe(201);
    expect(body).toMatchObject({
      title: null,
      status: 'idle',
      llm: null,
      tools: ALL_TOOLS,
      max_iterations_per_run: 500,
      confirmation_mode: false,
      pending_actions: [],
      current_run_id: null,
      event_count: 0,
      usage: { prompt_tokens: 0, completion_tokens: 0, cost: 0 },
      metadata: {},
    });
    expect(body.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(body.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(body.updated_at).toBe(body.created_at);
    expect(body.workdir).toBe(path.join(fs.realpathSync(server.dataDir), 'workspaces', body.id));
    expect(fs.statSync(body.workdir).isDirectory()).toBe(true);
  });

  it('takes a client workdir, title, tools, metadata and an initial message with run:false', async () => {
    const workdir = tempDir('agentd-client-workdir-');
    const { status, body } = await call('POST', '/conversations', {
      workdir,
      title: 'fix the build',
      tools: ['bash', 'finish', 'bash'],
      metadata: { ticket: 42 },
      max_iterations_per_run: 7,
      confirmation_mode: true,
      initial_message: 'hello',
      run: false,
    });
    expect(status).toBe(201);
    expect(body).toMatchObject({ workdir: fs.realpathSync(workdir), title: 'fix the build', tools: ['bash', 'finish'], metadata: { ticket: 42 }, max_iterations_per_run: 7, confirmation_mode: true, event_count: 1 });
    const events = await call('GET', `/conversations/${body.id}/events`);
    expect(events.body.items).toMatchObject([{ seq: 1, kind: 'message', source: 'user', role: 'user', content: 'hello' }]);
  });

  it.each([
    ['a relative path', 'relative/dir'],
    ['the data dir itself', '<data>'],
    ['a dir inside the data dir', '<data>/conversations'],
    ['a dir that contains the data dir', '/'],
    ['a path that climbs back into the data dir', '<data>/workspaces/../conversations/new'],
  ])('refuses %s as workdir with 422', async (_name, workdir) => {
    const { status, body } = await call('POST', '/conversations', { workdir: workdir.replace('<data>', server.dataDir) });
    expect(status).toBe(422);
    expect(body).toMatchObject({ error: 'invalid_workdir' });
    expect(typeof body.message).toBe('string');
  });

  it('refuses a workdir that is a file with 422', async () => {
    const file = path.join(tempDir(), 'a-file');
    fs.writeFileSync(file, 'x');
    expectError(await call('POST', '/conversations', { workdir: file }), { status: 422, error: 'invalid_workdir', message: /not a directory/ });
  });

  it('refuses an unknown tool with 422 naming it', async () => {
    const { status, body } = await call('POST', '/conversations', { tools: ['bash', 'teleport'] });
    expect(status).toBe(422);
    expect(body).toMatchObject({ error: 'unknown_tool', details: { unknown: ['teleport'] } });
  });

  it.each([
    ['max_iterations_per_run as a string', { max_iterations_per_run: 'many' }],
    ['tools as a string', { tools: 'bash' }],
    ['an unknown field', { colour: 'blue' }],
    ['llm without a model', { llm: { api_key: 'k' } }],
    ['an out-of-range temperature', { llm: { model: 'm', temperature: 9 } }],
    ['a bad reasoning_effort', { llm: { model: 'm', reasoning_effort: 'extreme' } }],
    ['a bad secret name', { secrets: { 'not a name': 'v' } }],
  ])('answers 400 with zod issues for %s', async (_name, payload) => {
    const { status, body } = await call('POST', '/conversations', payload);
    expect(status).toBe(400);
    expect(body.error).toBe('validation_error');
    expect(Array.isArray(body.details.issues)).toBe(true);
    expect(body.details.issues.length).toBeGreaterThan(0);
  });
});

describe('GET /conversations/{id}, list and count', () => {
  it('gets one, 404 for an unknown id, 400 for a malformed id', async () => {
    const created = (await call('POST', '/conversations', { title: 'one' })).body;
    expect(await call('GET', `/conversations/${created.id}`)).toEqual({ status: 200, body: created });
    const unknown = randomUUID();
    const missing = await call('GET', `/conversations/${unknown}`);
    expect(missing).toMatchObject({ status: 404, body: { error: 'conversation_not_found', details: { id: unknown } } });
    expectError(await call('GET', '/conversations/not-a-uuid'), { status: 400, error: 'validation_error', message: /id: Invalid UUID/ });
  });

  it('answers the bytes its list gives for it, with the content type of every JSON answer, and never an answer older than a change', async () => {
    const { id } = (await call('POST', '/conversations', { title: 'kept', metadata: { n: 1 } })).body;
    const raw = async () => server.app.inject({ method: 'GET', url: `/conversations/${id}`, headers: server.auth });
    const listed = async () => {
      const page = (await server.app.inject({ method: 'GET', url: '/conversations?limit=1000', headers: server.auth })).body;
      const start = page.indexOf(`{"id":"${id}"`);
      // The item ends where the next one (or the list) starts: its bytes are the object's own serialization.
      const end = page.indexOf(',{"id":', start) === -1 ? page.indexOf('],"next_page_id"') : page.indexOf(',{"id":', start);
      return page.slice(start, end);
    };
    const first = await raw();
    expect(first.statusCode).toBe(200);
    expect(first.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(first.body).toBe(await listed());
    // Read again: the same bytes (the second answer is the kept one).
    expect((await raw()).body).toBe(first.body);

    await call('PUT', `/conversations/${id}/config`, { title: 'changed' });
    const afterConfig = await raw();
    expect(afterConfig.json()).toMatchObject({ title: 'changed' });
    expect(afterConfig.body).toBe(await listed());

    server.services.store.addUsage(id, { prompt_tokens: 5, completion_tokens: 1, cost: 0.25, cached_tokens: 0, reasoning_tokens: 0 });
    expect((await raw()).json().usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 1, cost: 0.25 });
    server.services.store.setStatus(id, 'finished');
    const afterStatus = await raw();
    expect(afterStatus.json().status).toBe('finished');
    expect(afterStatus.body).toBe(await listed());
  });

  it('filters by status, sorts by created_at / updated_at both ways, and counts', async () => {
    const own = await startServer({ listen: false });
    try {
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) ids.push((await call('POST', '/conversations', { title: `c${i}` }, own)).body.id);
      // Two of them finish; the first one is touched last.
      for (const id of [ids[1]!, ids[4]!]) {
        own.services.store.setStatus(id, 'finished');
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
      await call('PUT', `/conversations/${ids[0]}/config`, { title: 'touched' }, own);

      const list = async (query: string) => (await call('GET', `/conversations?limit=1000&${query}`, undefined, own)).body.items as { id: string; created_at: string; updated_at: string }[];
      const byKey = (key: 'created_at' | 'updated_at') => (a: { id: string; created_at: string; updated_at: string }, b: typeof a) =>
        a[key] < b[key] ? -1 : a[key] > b[key] ? 1 : a.id < b.id ? -1 : 1;

      const all = await list('');
      expect(all.map((c) => c.id).sort()).toEqual([...ids].sort());
      for (const key of ['created_at', 'updated_at'] as const) {
        const asc = await list(`sort=${key}&order=asc`);
        expect(asc.map((c) => c.id)).toEqual([...all].sort(byKey(key)).map((c) => c.id));
        const desc = await list(`sort=${key}&order=desc`);
        expect(desc.map((c) => c.id)).toEqual(asc.map((c) => c.id).reverse());
      }
      expect(all.map((c) => c.id)).toEqual((await list('sort=created_at&order=desc')).map((c) => c.id));
      expect((await list('sort=updated_at&order=desc'))[0]!.id).toBe(ids[0]);

      expect((await list('status=finished')).map((c) => c.id).sort()).toEqual([ids[1], ids[4]].sort());
      expect(await list('status=running')).toEqual([]);
      expect((await call('GET', '/conversations/count', undefined, own)).body).toEqual({ count: 6 });
      expect((await call('GET', '/conversations/count?status=finished', undefined, own)).body).toEqual({ count: 2 });
      expect((await call('GET', '/conversations/count?status=idle', undefined, own)).body).toEqual({ count: 4 });
      expectError(await call('GET', '/conversations/count?status=bogus', undefined, own), { status: 400, error: 'validation_error', message: /at status/ });
      expectError(await call('GET', '/conversations?sort=title', undefined, own), { status: 400, error: 'validation_error', message: /at sort/ });
    } finally {
      await own.close();
    }
  });
});

describe('PUT /conversations/{id}/config', () => {
  it('merges llm, changes title and max_iterations_per_run, and never returns the api_key', async () => {
    const created = (await call('POST', '/conversations', { llm: { model: 'gpt-x', api_key: API_KEY, temperature: 0.5, base_url: 'http://127.0.0.1:9/v1' } })).body;
    expect(created.llm).toMatchObject({ model: 'gpt-x', api_key: '**********', temperature: 0.5, base_url: 'http://127.0.0.1:9/v1', top_p: null });

    const merged = await call('PUT', `/conversations/${created.id}/config`, { llm: { temperature: 0.2, reasoning_effort: 'low' }, title: 'renamed', max_iterations_per_run: 12 });
    expect(merged.status).toBe(200);
    expect(merged.body).toMatchObject({ title: 'renamed', max_iterations_per_run: 12 });
    expect(merged.body.llm).toMatchObject({ model: 'gpt-x', api_key: '**********', temperature: 0.2, reasoning_effort: 'low', base_url: 'http://127.0.0.1:9/v1' });
    expect(server.services.store.record(created.id).llm?.api_key).toBe(API_KEY);

    const renamedModel = await call('PUT', `/conversations/${created.id}/config`, { llm: { model: 'gpt-y' } });
    expect(renamedModel.body.llm).toMatchObject({ model: 'gpt-y', api_key: '**********', temperature: 0.2 });
    const cleared = await call('PUT', `/conversations/${created.id}/config`, { llm: { api_key: null }, title: null });
    expect(cleared.body.llm.api_key).toBeNull();
    expect(cleared.body.title).toBeNull();
    expect((await call('GET', `/conversations/${created.id}`)).body).toEqual(cleared.body);
    expect(cleared.body.updated_at >= created.updated_at).toBe(true);
  });

  it('needs a model for a conversation without an LLM, validates, and 404s', async () => {
    const created = (await call('POST', '/conversations', {})).body;
    expect(await call('PUT', `/conversations/${created.id}/config`, { llm: { temperature: 1 } })).toMatchObject({ status: 422, body: { error: 'llm_model_required' } });
    const set = await call('PUT', `/conversations/${created.id}/config`, { llm: { model: 'm', api_key: API_KEY } });
    expect(set.body.llm).toMatchObject({ model: 'm', api_key: '**********' });
    expectError(await call('PUT', `/conversations/${created.id}/config`, { max_iterations_per_run: 0 }), { status: 400, error: 'validation_error', message: /max_iterations_per_run/ });
    expectError(await call('PUT', `/conversations/${created.id}/config`, { tools: ['bash'] }), { status: 400, error: 'validation_error', message: /Unrecognized key: "tools"/ });
    expectError(await call('PUT', `/conversations/${created.id}/config`, { workdir: 'relative' }), { status: 422, error: 'invalid_workdir', message: /must be an absolute path/ });
    expectError(await call('PUT', `/conversations/${randomUUID()}/config`, { title: 'x' }), { status: 404, error: 'conversation_not_found', message: /No conversation with id/ });
  });

  it('keeps API keys out of the data dir in plain text', async () => {
    await call('POST', '/conversations', { llm: { model: 'm', api_key: API_KEY }, secrets: { TOKEN: API_KEY } });
    for (const file of allFiles(server.dataDir)) expect(fs.readFileSync(file, 'utf8'), file).not.toContain(API_KEY);
  });
});

describe('logs', () => {
  it('never carry an API key or the master key, whatever the request', async () => {
    const logStream = new PassThrough();
    let logs = '';
    logStream.on('data', (chunk: Buffer) => (logs += chunk.toString('utf8')));
    const own = await startServer({ listen: false, logStream, env: { AGENTD_LLM_MODEL: 'm', AGENTD_LLM_API_KEY: ENV_API_KEY } });
    try {
      const created = (await call('POST', '/conversations', { llm: { model: 'm', api_key: API_KEY } }, own)).body;
      await call('PUT', `/conversations/${created.id}/config`, { llm: { api_key: API_KEY } }, own);
      expectError(await call('POST', '/conversations', { llm: { model: 'm', api_key: API_KEY, temperature: 9 } }, own), { status: 400, error: 'validation_error', message: /llm\.temperature/ });
      expectError(await call('POST', '/conversations', { llm: { model: 'm', api_key: API_KEY }, workdir: 'relative' }, own), { status: 422, error: 'invalid_workdir', message: /must be an absolute path/ });
      await call('POST', '/conversations', {}, own);
      await own.app.inject({ method: 'GET', url: `/events/stream?after_seq=-1&access_token=${TEST_KEY}` });
      await own.app.inject({ method: 'GET', url: '/info', headers: { authorization: `Bearer ${API_KEY}` } });
    } finally {
      await own.close();
    }
    expect(logs).toContain('"level"');
    expect(logs).toContain('/events/stream');
    for (const secret of [API_KEY, ENV_API_KEY, TEST_KEY]) expect(logs).not.toContain(secret);
  });
});

describe('DELETE /conversations/{id}', () => {
  it('deletes state; delete_workdir=true removes a server-created workdir only', async () => {
    const kept = (await call('POST', '/conversations', {})).body;
    const removed = (await call('POST', '/conversations', { initial_message: 'bye', run: false })).body;
    const clientDir = tempDir('agentd-client-owned-');
    const clients = (await call('POST', '/conversations', { workdir: clientDir })).body;

    expect((await call('DELETE', `/conversations/${kept.id}`)).status).toBe(204);
    expect(fs.existsSync(kept.workdir)).toBe(true);
    expect((await call('DELETE', `/conversations/${removed.id}?delete_workdir=true`)).status).toBe(204);
    expect(fs.existsSync(removed.workdir)).toBe(false);
    expect((await call('DELETE', `/conversations/${clients.id}?delete_workdir=true`)).status).toBe(204);
    expect(fs.existsSync(clientDir)).toBe(true);

    for (const id of [kept.id, removed.id, clients.id]) {
      expectError(await call('GET', `/conversations/${id}`), { status: 404, error: 'conversation_not_found', message: /No conversation with id/ });
      expectError(await call('GET', `/conversations/${id}/events`), { status: 404, error: 'conversation_not_found', message: /No conversation with id/ });
      expect(fs.existsSync(path.join(server.dataDir, 'conversations', id))).toBe(false);
    }
    expectError(await call('DELETE', `/conversations/${kept.id}`), { status: 404, error: 'conversation_not_found', message: /No conversation with id/ });
    expectError(await call('DELETE', `/conversations/${randomUUID()}?delete_workdir=maybe`), { status: 400, error: 'validation_error', message: /delete_workdir/ });
  });
});

describe('LLM defaults from the environment', () => {
  it.each([
    ['AGENTD_LLM_*', { AGENTD_LLM_MODEL: 'env-model', AGENTD_LLM_BASE_URL: 'http://127.0.0.1:1/v1', AGENTD_LLM_API_KEY: ENV_API_KEY }],
    ['OPENAI_* fallback', { AGENTD_LLM_MODEL: 'env-model', OPENAI_BASE_URL: 'http://127.0.0.1:1/v1', OPENAI_API_KEY: ENV_API_KEY }],
  ])('%s', async (_name, env) => {
    const own = await startServer({ listen: false, env });
    try {
      const created = (await call('POST', '/conversations', {}, own)).body;
      expect(created.llm).toMatchObject({ model: 'env-model', base_url: 'http://127.0.0.1:1/v1', api_key: '**********' });
      const explicit = (await call('POST', '/conversations', { llm: { model: 'mine' } }, own)).body;
      expect(explicit.llm).toMatchObject({ model: 'mine', base_url: null, api_key: null });
      for (const file of allFiles(own.dataDir)) expect(fs.readFileSync(file, 'utf8')).not.toContain(ENV_API_KEY);
    } finally {
      await own.close();
    }
  });

  it('AGENTD_LLM_* wins over OPENAI_*, and no model means no default LLM', async () => {
    const own = await startServer({ listen: false, env: { AGENTD_LLM_MODEL: 'm', AGENTD_LLM_BASE_URL: 'http://a.example/v1', OPENAI_BASE_URL: 'http://b.example/v1' } });
    const none = await startServer({ listen: false, env: { OPENAI_API_KEY: ENV_API_KEY } });
    try {
      expect((await call('POST', '/conversations', {}, own)).body.llm).toMatchObject({ base_url: 'http://a.example/v1', api_key: null });
      expect((await call('POST', '/conversations', {}, none)).body.llm).toBeNull();
    } finally {
      await own.close();
      await none.close();
    }
  });
});
