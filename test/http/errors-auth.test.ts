import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, TEST_KEY, type TestServer } from '../support/agentd.js';
import { CONTRACT_ROUTES } from '../support/contract-routes.js';

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';
interface Operation {
  method: Method;
  path: string;
  operationId: string;
  isPublic: boolean;
  hasBody: boolean;
  query: string[];
}

const PUBLIC_PATHS = new Set(['/alive', '/health', '/openapi.json', '/asyncapi.json']);
const STREAM_PATHS = new Set(['/conversations/{id}/events/stream', '/events/stream']);

let server: TestServer;
let operations: Operation[];
let conversationId: string;

function operationsOf(document: { paths: Record<string, Record<string, { operationId: string; security?: unknown[]; requestBody?: unknown; parameters?: { in: string; name: string }[] }>> }): Operation[] {
  return Object.entries(document.paths).flatMap(([route, methods]) =>
    Object.entries(methods).map(([method, operation]) => ({
      method: method.toUpperCase() as Method,
      path: route,
      operationId: operation.operationId,
      isPublic: Array.isArray(operation.security) && operation.security.length === 0,
      hasBody: operation.requestBody !== undefined,
      query: (operation.parameters ?? []).filter((parameter) => parameter.in === 'query').map((parameter) => parameter.name),
    })),
  );
}

/** A concrete URL for an operation: path parameters become (unknown) uuids unless told otherwise. */
function urlOf(operation: Operation, id: string = randomUUID()): string {
  return operation.path.replace('{id}', id).replace(/\{[^}]+\}/g, () => randomUUID());
}

function expectErrorShape(body: unknown): void {
  expect(body).toEqual({ error: expect.any(String), message: expect.any(String), details: expect.toSatisfy((value: unknown) => value === null || typeof value === 'object') });
}

async function request(method: Method, url: string, options: { headers?: Record<string, string>; body?: string } = {}, target = server) {
  const response = await target.app.inject({ method, url, headers: options.headers ?? {}, ...(options.body !== undefined ? { payload: options.body } : {}) });
  return { status: response.statusCode, headers: response.headers, text: response.body, json: () => response.json() };
}

beforeAll(async () => {
  server = await startServer({ listen: false, env: { AGENTD_MAX_BODY_BYTES: '4096' } });
  operations = operationsOf((await request('GET', '/openapi.json')).json());
  conversationId = (await server.services.conversations.create({ max_iterations_per_run: 500, confirmation_mode: false })).conversation.id;
});
afterAll(async () => {
  await server?.close();
});

describe('auth sweep over every operation of the OpenAPI document', () => {
  it('finds the operations and exactly the public ones marked as such', () => {
    expect(operations.map((operation) => `${operation.method} ${operation.path}`).sort()).toEqual([...CONTRACT_ROUTES].sort());
    expect(new Set(operations.filter((operation) => operation.isPublic).map((operation) => operation.path))).toEqual(PUBLIC_PATHS);
  });

  it('answers 401 in the error shape without a key, with a wrong key and with a malformed header', async () => {
    for (const operation of operations.filter((op) => !op.isPublic)) {
      for (const headers of [{} as Record<string, string>, { authorization: 'Bearer wrong-key' }, { authorization: `Bearer ${TEST_KEY}x` }, { authorization: `Basic ${TEST_KEY}` }, { authorization: 'Bearer ' }, { authorization: TEST_KEY }]) {
        const url = urlOf(operation, conversationId);
        const response = await request(operation.method, url, { headers: { ...headers, ...(operation.hasBody ? { 'content-type': 'application/json' } : {}) }, ...(operation.hasBody ? { body: '{}' } : {}) });
        expect(response.status, `${operation.method} ${url} ${JSON.stringify(headers)}`).toBe(401);
        expect(response.headers['www-authenticate']).toBe('Bearer');
        expectErrorShape(response.json());
        expect(response.json().error).toBe('unauthorized');
      }
    }
  });

  it('lets the public operations, /docs and the dashboard files at /ui answer without a key', async () => {
    for (const operation of operations.filter((op) => op.isPublic)) {
      expect((await request(operation.method, operation.path)).status, operation.path).toBe(200);
      expect((await request(operation.method, operation.path, { headers: { authorization: 'Bearer wrong' } })).status).toBe(200);
    }
    const docs = await request('GET', '/docs');
    expect(docs.status).toBeLessThan(400);
    expect((await request('GET', '/docs/static/swagger-ui.css')).status).toBe(200);
    expect((await request('GET', '/docs/json')).status).toBe(200);
    // The dashboard's files carry no data (the page asks for the key); only its own files are public.
    for (const path of ['/ui', '/ui/', '/ui/index.html', '/ui/app.js', '/ui/app.css', '/ui/favicon.svg']) expect((await request('GET', path)).status, path).toBe(200);
    for (const path of ['/ui/other.js', '/ui/constructor']) expect((await request('GET', path)).status, path).toBe(404);
    for (const path of ['/ui/..%2finfo', '/ui/%2e%2e/info', '/ui/../info']) expect([401, 404], path).toContain((await request('GET', path)).status);
  });

  it('accepts ?access_token= only on the two stream routes', async () => {
    const streams = operations.filter((op) => STREAM_PATHS.has(op.path));
    expect(streams.map((op) => op.path).sort()).toEqual([...STREAM_PATHS].sort());
    // Past auth, the stream routes answer with what is wrong with the request instead of 401.
    expect((await request('GET', `/conversations/${randomUUID()}/events/stream?access_token=${TEST_KEY}`)).status).toBe(404);
    expect((await request('GET', `/events/stream?after_seq=-1&access_token=${TEST_KEY}`)).status).toBe(400);
    expect((await request('GET', `/events/stream?after_seq=-1&access_token=wrong`)).status).toBe(401);
    for (const operation of operations.filter((op) => !op.isPublic && !STREAM_PATHS.has(op.path))) {
      const url = `${urlOf(operation, conversationId)}?access_token=${encodeURIComponent(TEST_KEY)}`;
      expect((await request(operation.method, url)).status, `${operation.method} ${url}`).toBe(401);
    }
  });

  it('accepts every key of a rotation list (AGENTD_MASTER_KEY=a,b)', async () => {
    const rotating = await startServer({ listen: false, env: { AGENTD_MASTER_KEY: 'key-old, key-new' } });
    try {
      for (const key of ['key-old', 'key-new']) expect((await request('GET', '/info', { headers: { authorization: `Bearer ${key}` } }, rotating)).status).toBe(200);
      for (const key of ['key-old,key-new', 'key', TEST_KEY]) expect((await request('GET', '/info', { headers: { authorization: `Bearer ${key}` } }, rotating)).status).toBe(401);
      expect((await request('GET', '/info', { headers: { authorization: 'bearer key-new' } }, rotating)).status).toBe(200);
    } finally {
      await rotating.close();
    }
  });

  it('generates a key file (mode 0600) when AGENTD_MASTER_KEY is unset, and reuses it on the next start', async () => {
    const first = await startServer({ listen: false, env: { AGENTD_MASTER_KEY: '' } });
    const keyFile = path.join(first.dataDir, 'master.key');
    let key: string;
    try {
      expect(first.services.masterKeyFile).toBe(keyFile);
      expect(first.services.masterKeyCreated).toBe(true);
      expect(fs.statSync(keyFile).mode & 0o777).toBe(0o600);
      key = fs.readFileSync(keyFile, 'utf8').trim();
      expect(key.length).toBeGreaterThanOrEqual(32);
      expect((await request('GET', '/info', { headers: { authorization: `Bearer ${key}` } }, first)).status).toBe(200);
      expect((await request('GET', '/info', { headers: { authorization: `Bearer ${TEST_KEY}` } }, first)).status).toBe(401);
      expect((await request('GET', '/info', {}, first)).status).toBe(401);
    } finally {
      await first.close();
    }
    const second = await startServer({ listen: false, dataDir: first.dataDir, env: { AGENTD_MASTER_KEY: '' } });
    try {
      expect(second.services.masterKeyCreated).toBe(false);
      expect(fs.readFileSync(keyFile, 'utf8').trim()).toBe(key);
      expect((await request('GET', '/info', { headers: { authorization: `Bearer ${key}` } }, second)).status).toBe(200);
    } finally {
      await second.close();
    }
  });
});

describe('errors', () => {
  const auth = () => ({ authorization: `Bearer ${TEST_KEY}` });
  const json = () => ({ ...auth(), 'content-type': 'application/json' });

  it.each([
    ['malformed JSON', '{"title": ', 'invalid_json'],
    ['a trailing comma', '{"title": "x",}', 'invalid_json'],
    ['JSON nested 1,500 deep', `${'['.repeat(1500)}${']'.repeat(1500)}`, 'invalid_json'],
    ['objects nested 100 deep inside metadata', `{"metadata":${'{"a":'.repeat(100)}1${'}'.repeat(100)}}`, 'invalid_json'],
  ])('%s → 400', async (_name, body, code) => {
    const response = await request('POST', '/conversations', { headers: json(), body });
    expect(response.status).toBe(400);
    expectErrorShape(response.json());
    expect(response.json().error).toBe(code);
  });

  it('nesting: 64 levels pass the parser, 65 do not, whether the brackets are few or many; brackets inside strings do not count', async () => {
    const nested = (depth: number) => `{"metadata":${'{"a":'.repeat(depth - 1)}1${'}'.repeat(depth - 1)}}`;
    const inStrings = (depth: number) => `{"title":"${'[{'.repeat(200)}","metadata":${'{"a":'.repeat(depth - 1)}"${'{['.repeat(200)}"${'}'.repeat(depth - 1)}}`;
    for (const [name, body] of [['64 levels', nested(64)], ['64 levels and 800 brackets in strings', inStrings(64)], ['800 brackets in strings only', `{"title":"${'[{'.repeat(400)}"}`]]) {
      // Past the parser: what validation says of it (the metadata is an object), never invalid_json.
      const response = await request('POST', '/conversations', { headers: json(), body });
      expect(response.json().error, name).not.toBe('invalid_json');
    }
    for (const [name, body] of [['65 levels', nested(65)], ['65 levels and 800 brackets in strings', inStrings(65)]]) {
      const response = await request('POST', '/conversations', { headers: json(), body });
      expect(response.status, name).toBe(400);
      expect(response.json(), name).toMatchObject({ error: 'invalid_json', details: { max_depth: 64 } });
    }
  });

  it('wrong content type → 415', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const response = await request('POST', '/conversations', { headers: { ...auth(), 'content-type': type }, body: 'title=x' });
      expect(response.status, type).toBe(415);
      expectErrorShape(response.json());
      expect(response.json().error).toBe('unsupported_media_type');
    }
  });

  it('a body over the limit → 413', async () => {
    const response = await request('POST', `/conversations/${conversationId}/messages`, { headers: json(), body: JSON.stringify({ content: 'x'.repeat(5000), run: false }) });
    expect(response.status).toBe(413);
    expectErrorShape(response.json());
    expect(response.json().error).toBe('payload_too_large');
  });

  it('a validation error quotes what was sent only clipped, and lists at most 20 issues', async () => {
    const longKey = 'k'.repeat(3000);
    const cases = [
      { body: { title: 't', [longKey]: 1 }, where: 'an unknown key' },
      { body: { secrets: { [`bad-${longKey}`]: 'v' } }, where: 'a record key' },
      { body: { secrets: Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`b-${i}`, 'v'])) }, where: 'an issue per secret name' },
    ];
    for (const { body, where } of cases) {
      const response = await request('POST', '/conversations', { headers: json(), body: JSON.stringify(body) });
      expect(response.status, where).toBe(400);
      expectErrorShape(response.json());
      expect(response.text.length, where).toBeLessThan(6000);
    }
    const unknown = (await request('POST', '/conversations', { headers: json(), body: JSON.stringify(cases[0]!.body) })).json();
    expect(unknown.message).toBe(`Invalid body: Unrecognized key: "${'k'.repeat(200)}… (3,000 characters)".`);
    const record = (await request('POST', '/conversations', { headers: json(), body: JSON.stringify(cases[1]!.body) })).json();
    expect(record.details.issues[0].path).toEqual(['secrets', `bad-${'k'.repeat(196)}… (3,004 characters)`]);
    const many = (await request('POST', '/conversations', { headers: json(), body: JSON.stringify(cases[2]!.body) })).json();
    expect(many.details.issues).toHaveLength(20);
    expect(many.details.omitted_issues).toBe(280);
  });

  it('unknown route → 404 with the key (401 without), unknown method → 404', async () => {
    const unknown = await request('GET', '/no/such/route', { headers: auth() });
    expect(unknown.status).toBe(404);
    expectErrorShape(unknown.json());
    expect(unknown.json().error).toBe('route_not_found');
    expect((await request('GET', '/no/such/route')).status).toBe(401);
    expect((await request('PATCH', '/conversations', { headers: auth() })).status).toBe(404);
  });

  it('a 5xx carries no stack, path or detail', async () => {
    const own = await startServer({ listen: false });
    try {
      const conversationsDir = path.join(own.dataDir, 'conversations');
      fs.rmSync(conversationsDir, { recursive: true });
      fs.writeFileSync(conversationsDir, 'not a directory');
      const response = await request('POST', '/conversations', { headers: json(), body: '{}' }, own);
      expect(response.status).toBe(500);
      expect(response.json()).toEqual({ error: 'internal_error', message: 'An internal error occurred.', details: null });
      expect(response.text).not.toContain(own.dataDir);
    } finally {
      await own.close();
    }
  });
});

describe('nothing answers 500 for bad input', () => {
  const badValues = ['', 'x', '-1', '0', '1e309', '99999999999999999999', 'null', '[]', '{}', '%00', '%E2%28', 'true', 'a,b,,', '1.5'];
  const badBodies = ['null', '[]', '"text"', '12', 'true', '{}', '{"__proto__":{"polluted":1}}', '{"constructor":{"prototype":{"polluted":1}}}', '{"content":null}',
    '{"content":"x","run":"yes"}', '{"title":123,"llm":[]}', `{"metadata":${'{"a":'.repeat(60)}1${'}'.repeat(60)}}`, '{"workdir":"/\\u0000x"}', '{"content":"\\ud800","run":false}', '{"llm":{"model":"m","base_url":"file:///etc/passwd"}}'];
  const badIds = ['not-a-uuid', '..%2F..%2Fetc%2Fpasswd', '%00', '%E2%28', 'x'.repeat(5000), '00000000-0000-0000-0000-000000000000'];

  it('for every operation: bad path ids, bad query values and bad bodies', async () => {
    let checked = 0;
    const check = async (operation: Operation, url: string, options: { body?: string; headers?: Record<string, string> } = {}) => {
      const response = await request(operation.method, url, { headers: { authorization: `Bearer ${TEST_KEY}`, ...options.headers }, ...(options.body !== undefined ? { body: options.body } : {}) });
      checked += 1;
      expect(response.status, `${operation.method} ${url} ${options.body ?? ''}`.slice(0, 300)).toBeLessThan(500);
      if (response.status >= 400) expectErrorShape(response.json());
      return response;
    };
    for (const operation of operations) {
      const isStream = STREAM_PATHS.has(operation.path);
      if (operation.path.includes('{')) {
        for (const id of badIds) await check(operation, operation.path.replace(/\{[^}]+\}/g, id));
      }
      for (const name of operation.query) {
        for (const value of badValues) {
          // A stream route given a valid query would stream forever; aim it at an unknown conversation.
          // (The firehose has no such target: it is covered over a real listener below.)
          if (operation.path === '/events/stream') continue;
          const base = isStream ? urlOf(operation) : urlOf(operation, conversationId);
          await check(operation, `${base}?${name}=${value}`);
          await check(operation, `${base}?${name}=${value}&${name}=${value}`);
        }
      }
      if (operation.hasBody) {
        for (const body of badBodies) {
          const response = await check(operation, urlOf(operation, conversationId), { body, headers: { 'content-type': 'application/json' } });
          if (response.status < 300 && operation.method === 'POST' && operation.path === '/conversations') {
            expect(({} as Record<string, unknown>).polluted).toBeUndefined();
          }
        }
        await check(operation, urlOf(operation, conversationId), { body: '{}', headers: { 'content-type': 'application/json; charset=utf-16' } });
        await check(operation, urlOf(operation, conversationId), { body: '--x--', headers: { 'content-type': 'multipart/form-data' } });
      }
    }
    expect(checked).toBeGreaterThan(400);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('for the firehose, over a real listener (a valid query streams)', async () => {
    const live = await startServer();
    try {
      for (const value of [...badValues, '1', '%20']) {
        for (const header of [{} as Record<string, string>, { 'last-event-id': value }]) {
          const controller = new AbortController();
          const response = await fetch(`${live.url}/events/stream?after_seq=${value}`, { headers: { ...live.auth, ...header }, signal: controller.signal });
          expect(response.status, `after_seq=${value} ${JSON.stringify(header)}`).toBeLessThan(500);
          if (response.status >= 400) expectErrorShape(await response.json());
          else expect(response.headers.get('content-type')).toContain('text/event-stream');
          controller.abort();
        }
      }
    } finally {
      await live.close();
    }
  });
});
