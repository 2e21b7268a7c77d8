/**
 * R5 malformed input, against a spawned server (dist/cli.js) over real sockets: for every JSON
 * route of the OpenAPI document, bodies with missing fields, wrong types, strings of 1 MB (5 MB with
 * `AGENTD_HEAVY_TESTS=1`: 95 of them took ~20 s of a 2-core machine, ~40 s beside the rest), nesting
 * 10,000 deep, invalid UTF-8, the wrong content type, nothing at all or more than the limit; for
 * every route with a query, huge, repeated and odd parameters; bytes that are not HTTP. No answer
 * is a 5xx, every error has the contract's shape, a refused request changes nothing, and the
 * process is still up at the end. (errors-auth.test.ts covers bad path ids, bad query values and
 * JSON null/array/number bodies.)
 */
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { spawnServer, tempDir, TEST_KEY, type SpawnedServer } from '../support/agentd.js';
import { apiClient, scaled } from '../support/reliability.js';

const BODY_LIMIT = 8 * 1024 * 1024;
/** Far past every field's limit, under the body limit. */
const LARGE_BYTES = scaled(1, 5) * 1024 * 1024;
const LARGE_LABEL = `${LARGE_BYTES / 1024 / 1024} MB`;
const LARGE = 'x'.repeat(LARGE_BYTES);
const DEEP = 10_000;
/** No error answer is larger: none repeats what was sent. */
const MAX_ERROR_BYTES = 16 * 1024;

interface Operation {
  method: string;
  route: string;
  operationId: string;
  jsonBody: boolean;
  query: string[];
}

/** A valid body for every JSON route: the base each malformed variant is made from. */
const BASE_BODIES: Record<string, Record<string, unknown>> = {
  'conversations.create': {
    title: 't', metadata: { a: 1 }, tools: ['bash'], max_iterations_per_run: 5, confirmation_mode: false, secrets: { NAME_A: 'value-a' },
    llm: { model: 'm', base_url: 'http://127.0.0.1:9/v1', api_key: 'k', temperature: 0.5, reasoning_effort: 'low' }, initial_message: 'hi', run: false,
    condenser: { max_tokens: 5000, keep_first: 1, keep_last: 4 }, multitask_strategy: 'enqueue',
  },
  'conversations.updateConfig': { title: 't', max_iterations_per_run: 3, llm: { model: 'm', temperature: 0.2 }, condenser: { keep_last: 3 }, multitask_strategy: 'reject' },
  'conversations.condense': { instructions: 'keep the plan' },
  'messages.send': { content: 'hello', run: false, multitask_strategy: 'interrupt' },
  'runs.setConfirmation': { enabled: false },
  'runs.reject': { reason: 'no' },
  'runs.answer': { tool_call_id: 'call_1', content: 'yes' },
  'secrets.put': { secrets: { NAME_B: 'value-b' } },
  'commands.run': { command: 'true', timeout_s: 5, cwd: '.' },
  'callbacks.create': { url: 'http://127.0.0.1:9/hook', events: ['message'], secret: 'abc' },
  'checkpoints.rewind': { checkpoint_id: '00000000-0000-4000-8000-000000000000', files: true, conversation: false },
  'conversations.fork': { at_seq: 1, title: 't', copy_workdir: false, copy_secrets: false },
  'keys.create': { name: 'k', scopes: ['conversations:read'], owner: 'team-a', limits: { rpm: 10, concurrent_runs: 1 }, allowed_models: ['m'] },
  'keys.update': { name: 'k2', scopes: ['conversations:read'] },
  'keys.rotate': { grace_s: 60 },
  'schedules.create': { cron: '0 * * * *', timezone: 'UTC', message: { content: 'hi' }, conversation_id: '00000000-0000-4000-8000-000000000000', overlap: 'skip', catchup: { window_s: 60, max: 1 } },
  'schedules.createForConversation': { every: 'PT1H', message: { content: 'hi' }, jitter_s: 0 },
  'schedules.update': { cron: '30 2 * * *', timezone: 'Europe/Berlin' },
  'schedules.pause': { note: 'later' },
};

const WRONG_VALUES: unknown[] = [null, 0, -1, 1.5, 1e308, '', 'x', true, [], [1, 'a'], {}, { a: { b: [] } }];

let server: SpawnedServer;
const dataDirs = [tempDir('agentd-malformed-'), tempDir('agentd-malformed-wd-')];
let operations: Operation[];
let conversationId: string;
const failures: string[] = [];
let sent = 0;
/** Conversations the server said it created (201 to POST /conversations). */
let created = 0;

interface Sent {
  status: number;
  contentType: string;
  text: string;
}

/**
 * One request on a fresh connection, bytes exactly as given. `chunked`: no Content-Length, sent a
 * piece at a time until the server answers. `declaredLength`: a Content-Length larger than what is
 * sent (the server must answer from the header alone). No answer at all gives status 0.
 */
function send(options: { method: string; path: string; body?: Buffer | string; headers?: Record<string, string>; chunked?: boolean; declaredLength?: number }): Promise<Sent> {
  return new Promise((resolve, reject) => {
    const body = options.body === undefined ? undefined : Buffer.isBuffer(options.body) ? options.body : Buffer.from(options.body, 'utf8');
    const headers: Record<string, string> = { authorization: `Bearer ${TEST_KEY}`, ...options.headers };
    if (options.declaredLength !== undefined) headers['content-length'] = String(options.declaredLength);
    else if (body && !options.chunked) headers['content-length'] = String(body.length);
    // Explicit: Node's client frames DELETE bodies only when told.
    if (options.chunked) headers['transfer-encoding'] = 'chunked';
    let answered = false;
    const request = http.request({ host: '127.0.0.1', port: server.port, method: options.method, path: options.path, headers, agent: false }, (response) => {
      answered = true;
      const chunks: Buffer[] = [];
      const contentType = String(response.headers['content-type'] ?? '');
      const done = (text: string) => {
        request.destroy();
        resolve({ status: response.statusCode ?? 0, contentType, text });
      };
      // A stream that opened is a success; it would never end by itself.
      if (contentType.startsWith('text/event-stream')) return done('');
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => done(Buffer.concat(chunks).toString('utf8')));
      response.on('error', reject);
    });
    request.on('error', (error: NodeJS.ErrnoException) => {
      if (!answered) resolve({ status: 0, contentType: '', text: `no answer: ${error.code ?? error.message}` });
    });
    if (!body) request.end();
    else if (options.declaredLength !== undefined) request.write(body);
    else if (options.chunked) {
      const pump = (at: number): void => {
        if (answered || at >= body.length) return void request.end();
        request.write(body.subarray(at, at + 256 * 1024), () => pump(at + 256 * 1024));
      };
      pump(0);
    } else request.end(body);
  });
}

/** Sends and records what is wrong with the answer: a 5xx, or an error without the contract's shape. */
/** Set when a test ends (even by timing out): its loop of probes stops instead of running into the next test. */
let stopped = false;

async function probe(what: string, options: Parameters<typeof send>[0], expectStatus?: number): Promise<Sent> {
  if (stopped) throw new Error('the test ended: no more probes');
  const response = await send(options);
  sent += 1;
  // A fork (POST .../fork) creates a conversation too.
  if (options.method === 'POST' && (options.path === '/conversations' || /^\/conversations\/[^/]+\/fork(\?|$)/.test(options.path)) && response.status === 201) created += 1;
  const label = `${options.method} ${options.path.slice(0, 120)} ${what}`;
  if (response.status === 0 || response.status >= 500) failures.push(`${label} → ${response.status} ${response.text.slice(0, 200)}`);
  else if (expectStatus !== undefined && response.status !== expectStatus) failures.push(`${label} → ${response.status}, expected ${expectStatus}: ${response.text.slice(0, 200)}`);
  if (response.status >= 400) {
    let shapeOk = response.contentType.startsWith('application/json');
    try {
      const body = JSON.parse(response.text) as Record<string, unknown>;
      shapeOk &&= Object.keys(body).sort().join() === 'details,error,message' && typeof body.error === 'string' && typeof body.message === 'string' && (body.details === null || typeof body.details === 'object');
    } catch {
      shapeOk = false;
    }
    if (!shapeOk) failures.push(`${label} → ${response.status} without the error shape: ${response.text.slice(0, 200)}`);
    // An error quotes what was sent only clipped: a 5 MB key was once answered with 10 MB.
    if (response.text.length > MAX_ERROR_BYTES) failures.push(`${label} → ${response.status} of ${response.text.length} bytes: an error echoes the request`);
  }
  return response;
}

/** A concrete path: the conversation under test, unknown ids elsewhere (destructive routes only on unknown ids). */
function pathOf(operation: Operation): string {
  const destructive = operation.operationId === 'conversations.delete' || operation.operationId === 'runs.cancel';
  return operation.route.replace('{id}', destructive ? randomUUID() : conversationId).replace('{path}', 'f.txt').replace(/\{[^}]+\}/g, () => randomUUID());
}

function bodyVariants(base: Record<string, unknown>): Array<[string, string]> {
  const variants: Array<[string, string]> = [['valid', JSON.stringify(base)], ['no fields', '{}']];
  const paths: string[][] = [];
  for (const [key, value] of Object.entries(base)) {
    paths.push([key]);
    if (value && typeof value === 'object' && !Array.isArray(value)) for (const inner of Object.keys(value)) paths.push([key, inner]);
  }
  const withValue = (path: string[], value: unknown, remove = false) => {
    const copy = structuredClone(base) as Record<string, any>;
    const parent = path.length === 1 ? copy : copy[path[0]!];
    if (remove) delete parent[path.at(-1)!];
    else parent[path.at(-1)!] = value;
    return JSON.stringify(copy);
  };
  for (const path of paths) {
    const name = path.join('.');
    variants.push([`without ${name}`, withValue(path, undefined, true)]);
    for (const value of WRONG_VALUES) variants.push([`${name}=${JSON.stringify(value)}`, withValue(path, value)]);
    const original = path.length === 1 ? base[path[0]!] : (base[path[0]!] as Record<string, unknown>)[path[1]!];
    if (typeof original === 'string') variants.push([`${name} of ${LARGE_LABEL}`, withValue(path, LARGE)]);
    variants.push([`${name} nested ${DEEP} deep`, withValue(path, 'DEEP').replace('"DEEP"', `${'['.repeat(DEEP)}${']'.repeat(DEEP)}`)]);
  }
  variants.push([`a ${LARGE_LABEL} unknown field`, JSON.stringify({ ...base, zz_unknown: LARGE })], [`a ${LARGE_LABEL} field name`, JSON.stringify({ ...base, [LARGE]: 1 })]);
  variants.push([`objects nested ${DEEP} deep`, `${'{"a":'.repeat(DEEP)}1${'}'.repeat(DEEP)}`], [`arrays nested ${DEEP} deep`, `${'['.repeat(DEEP)}${']'.repeat(DEEP)}`]);
  variants.push([`unclosed nesting ${DEEP} deep`, '{"a":'.repeat(DEEP)], [`a ${LARGE_LABEL} number`, `{"n":${'9'.repeat(LARGE_BYTES)}}`], [`${LARGE_LABEL} of whitespace`, `${' '.repeat(LARGE_BYTES)}{}`]);
  return variants;
}

/** The base body with invalid UTF-8 bytes inside a string, and outside one. */
function invalidUtf8Bodies(base: Record<string, unknown>): Array<[string, Buffer]> {
  const text = JSON.stringify(base);
  const inString = text.indexOf('"') + 1;
  const sequences = { 'a lone 0xFF': [0xff], 'an overlong slash': [0xc0, 0xaf], 'a UTF-16 surrogate': [0xed, 0xa0, 0x80], 'a 5-byte form': [0xf8, 0x88, 0x80, 0x80, 0x80], 'a cut sequence': [0xe2, 0x82], 'a stray continuation': [0x80, 0xbf] };
  return Object.entries(sequences).flatMap(([name, bytes]): Array<[string, Buffer]> => [
    [`${name} in a string`, Buffer.concat([Buffer.from(text.slice(0, inString)), Buffer.from(bytes), Buffer.from(text.slice(inString))])],
    [`${name} between tokens`, Buffer.concat([Buffer.from('{'), Buffer.from(bytes), Buffer.from(text.slice(1))])],
  ]);
}

beforeAll(async () => {
  server = await spawnServer({ dataDir: dataDirs[0]!, env: { AGENTD_MAX_BODY_BYTES: String(BODY_LIMIT), AGENTD_WORKDIR_BASE: dataDirs[1]! } });
  const api = apiClient(server.url);
  const document = (await api.get('/openapi.json')).json() as { paths: Record<string, Record<string, { operationId: string; requestBody?: { content: Record<string, unknown> }; parameters?: { in: string; name: string }[] }>> };
  operations = Object.entries(document.paths).flatMap(([route, methods]) =>
    Object.entries(methods).map(([method, operation]) => ({
      method: method.toUpperCase(),
      route,
      operationId: operation.operationId,
      jsonBody: operation.requestBody?.content['application/json'] !== undefined,
      query: (operation.parameters ?? []).filter((parameter) => parameter.in === 'query').map((parameter) => parameter.name),
    })),
  );
  conversationId = (await api.post('/conversations', { title: 'malformed target' })).json().id;
});
afterAll(async () => {
  server?.child.kill('SIGTERM');
  await server?.exited;
  for (const dir of dataDirs) fs.rmSync(dir, { recursive: true, force: true });
});

/** These tests send hundreds of requests each: their own budget, not vitest's 30 s default. */
const PROBE_BUDGET_MS = 180_000;

beforeEach(() => {
  stopped = false;
});
afterEach(() => {
  stopped = true;
});

describe('malformed input never gets a 5xx, always gets the error shape, and never stops the server', () => {
  it('covers every JSON route of the OpenAPI document', () => {
    const jsonRoutes = operations.filter((operation) => operation.jsonBody).map((operation) => operation.operationId);
    expect(jsonRoutes.sort()).toEqual(Object.keys(BASE_BODIES).sort());
  });

  it(`JSON bodies: missing fields, wrong types, ${LARGE_LABEL} strings, deep nesting, invalid UTF-8`, { timeout: PROBE_BUDGET_MS }, async () => {
    for (const operation of operations.filter((op) => op.jsonBody)) {
      const path = pathOf(operation);
      const json = { 'content-type': 'application/json' };
      for (const [what, body] of bodyVariants(BASE_BODIES[operation.operationId]!)) await probe(what, { method: operation.method, path, body, headers: json });
      for (const [what, body] of invalidUtf8Bodies(BASE_BODIES[operation.operationId]!)) await probe(what, { method: operation.method, path, body, headers: json });
    }
    expect(failures).toEqual([]);
    expect(sent).toBeGreaterThan(500);
  });

  it('every body-taking route: wrong content types, empty bodies, bodies past the limit (413)', { timeout: PROBE_BUDGET_MS }, async () => {
    const withBodies = operations.filter((op) => ['POST', 'PUT', 'DELETE', 'PATCH'].includes(op.method));
    expect(withBodies.length).toBeGreaterThan(10);
    for (const operation of withBodies) {
      const path = pathOf(operation);
      const body = JSON.stringify(BASE_BODIES[operation.operationId] ?? {});
      const types = ['text/plain', 'application/xml', 'application/x-www-form-urlencoded', 'application/octet-stream', 'multipart/form-data; boundary=x', 'application/json; charset=utf-16le', 'application/jsonx', `application/json; ${'p=v; '.repeat(1000)}`, 'application/json, text/plain', '*/*', 'application/'];
      for (const type of types) await probe(`as ${type.slice(0, 40)}`, { method: operation.method, path, body, headers: { 'content-type': type } });
      await probe('without a content type', { method: operation.method, path, body });
      await probe('claiming gzip', { method: operation.method, path, body, headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } });
      await probe('UTF-16 encoded', { method: operation.method, path, body: Buffer.from(body, 'utf16le'), headers: { 'content-type': 'application/json; charset=utf-16le' } });
      for (const empty of ['', ' ', '\n\t ', '\uFEFF']) await probe(`empty ${JSON.stringify(empty)}`, { method: operation.method, path, body: empty, headers: { 'content-type': 'application/json' } });
      const over = `{"content":"${'y'.repeat(BODY_LIMIT)}"}`;
      await probe('past the body limit', { method: operation.method, path, body: over.slice(0, 65_536), declaredLength: over.length, headers: { 'content-type': 'application/json' } }, 413);
      await probe('past the body limit, chunked', { method: operation.method, path, body: over, headers: { 'content-type': 'application/json' }, chunked: true }, 413);
      await probe(`a ${LARGE_LABEL} string`, { method: operation.method, path, body: `{"content":"${LARGE}","run":false}`, headers: { 'content-type': 'application/json' } });
      await probe('nested 10,000 deep', { method: operation.method, path, body: `${'['.repeat(DEEP)}${']'.repeat(DEEP)}`, headers: { 'content-type': 'application/json' } });
    }
    // Routes that take no body are not bothered by one either.
    for (const operation of operations.filter((op) => op.method === 'GET' && !op.route.endsWith('/stream'))) {
      await probe('a GET with a broken JSON body', { method: 'GET', path: pathOf(operation), body: `{"a":${'['.repeat(DEEP)}\xff`, headers: { 'content-type': 'application/json' } });
    }
    expect(failures).toEqual([]);
  });

  it('query strings: huge, repeated, many, odd parameters; past the header limit: 431', { timeout: PROBE_BUDGET_MS }, async () => {
    for (const operation of operations.filter((op) => op.query.length > 0)) {
      // A stream on the conversation would stay open: aim the stream routes at an unknown conversation.
      const path = operation.route.endsWith('/stream') ? operation.route.replace('{id}', randomUUID()) : pathOf(operation);
      for (const name of operation.query) {
        const queries = [
          `${name}=${'9'.repeat(12_000)}`,
          Array.from({ length: 1000 }, (_, i) => `${name}=${i}`).join('&'),
          `${name}[]=1&${name}[a]=2&${name}.b=3`,
          `${name}=%&${name}=%zz&${name}=%C0%AF&${name}=%FF%FE`,
          `${name}=${encodeURIComponent('\u0000\u202e\uffff')}`,
        ];
        for (const query of queries) await probe(`?${query.slice(0, 60)}`, { method: operation.method, path: `${path}?${query}` });
      }
      await probe('2,000 unknown parameters', { method: operation.method, path: `${path}?${Array.from({ length: 2000 }, (_, i) => `p${i}=1`).join('&')}` });
      await probe('prototype keys', { method: operation.method, path: `${path}?__proto__=1&constructor=2&toString=3&hasOwnProperty=4&__proto__[x]=5` });
      await probe('a query past the header limit', { method: operation.method, path: `${path}?${operation.query[0]}=${'9'.repeat(20_000)}` }, 431);
    }
    await probe('a header past the limit', { method: 'GET', path: '/info', headers: { 'x-big': 'h'.repeat(20_000) } }, 431);
    expect(failures).toEqual([]);
  });

  it('bytes that are not valid HTTP: 400 in the error shape', { timeout: PROBE_BUDGET_MS }, async () => {
    const garbage = [
      'GET /info HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n',
      'GET /info HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n',
      'GET /info HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n',
      'GET /info HTTP/1.1\r\nHo\u0000st: x\r\n\r\n',
      'GET /in fo HTTP/1.1\r\n\r\n',
      'BREW /info HTTP/1.1\r\n\r\n',
      '\u0016\u0003\u0001\u0000\u00a5\u0001\u0000\u0000\u00a1\u0003\u0003',
    ];
    for (const bytes of garbage) {
      const answer = await new Promise<string>((resolve) => {
        const socket = net.connect(server.port, '127.0.0.1', () => socket.write(Buffer.from(bytes, 'latin1')));
        let text = '';
        socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
        socket.on('close', () => resolve(text));
        socket.on('error', () => undefined);
      });
      const [head = '', body = ''] = answer.split('\r\n\r\n');
      expect(head, JSON.stringify(bytes)).toMatch(/^HTTP\/1\.1 4\d\d /);
      expect(Object.keys(JSON.parse(body)).sort(), JSON.stringify(bytes)).toEqual(['details', 'error', 'message']);
    }
  });

  it('a refused request changes nothing', async () => {
    const api = apiClient(server.url);
    // A file the test made, not a system path: a workdir that is not a directory.
    const notADirectory = `${dataDirs[1]!}/not-a-directory.txt`;
    fs.writeFileSync(notADirectory, 'a file\n');
    const count = async () => (await api.get('/conversations/count')).json().count as number;
    const before = await count();
    // No LLM anywhere, so the initial message cannot start a run: 422, and no conversation.
    for (const body of [{ initial_message: 'hi' }, { initial_message: 'hi', run: true, title: 't' }, { initial_message: 'hi', workdir: 'relative' }, { tools: ['no_such_tool'] }]) {
      expect((await api.post('/conversations', body)).status, JSON.stringify(body)).toBe(422);
    }
    expect(await count()).toBe(before);
    const target = (await api.post('/conversations', { llm: { model: 'm', temperature: 0.1 }, title: 'kept' })).json().id as string;
    created += 1;
    const unchanged = (await api.get(`/conversations/${target}`)).text;
    for (const body of [{ llm: { temperature: 0.9 }, title: 'changed', workdir: 'relative' }, { llm: { model: 'other' }, max_iterations_per_run: 7, workdir: notADirectory }]) {
      expect((await api.request('PUT', `/conversations/${target}/config`, body)).status, JSON.stringify(body)).toBe(422);
      expect((await api.get(`/conversations/${target}`)).text).toBe(unchanged);
    }
  });

  it('the server is still up: /alive answers and the process has not exited', async () => {
    const alive = await fetch(`${server.url}/alive`);
    expect(alive.status).toBe(200);
    expect(server.child.exitCode).toBeNull();
    expect(server.child.signalCode).toBeNull();
    // Exactly the conversations it said it created exist (the target, and every 201).
    expect((await apiClient(server.url).get('/conversations/count')).json().count).toBe(created + 1);
    // No request made the server log an error (a 5xx or a crash on the way). Runs this test
    // started against an unreachable LLM do end in agent_error, logged at error by design.
    const errorLines = server.output().split('\n').filter((line) => /"level":(50|60)/.test(line) && !line.includes('"msg":"run ended in agent_error: '));
    expect(errorLines).toEqual([]);
  });
});
