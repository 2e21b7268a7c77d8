/**
 * R3 auth, beyond errors-auth.test.ts (which sweeps every operation of the OpenAPI document
 * without a key, with wrong and malformed ones, and `?access_token=` everywhere): over a real
 * socket, every protected route reached by HEAD and OPTIONS, by paths dressed up as public ones
 * (`/docs/..`, `/ui/..`, `/alive/..`, encoded dots, doubled slashes) and with the key sent where it does not
 * count. Nothing ever answers below 400 without the key.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, TEST_KEY, type TestServer } from '../support/agentd.js';
import { rawRequest } from '../support/raw-http.js';

interface Operation {
  method: string;
  path: string;
  isPublic: boolean;
}

let server: TestServer;
let operations: Operation[];
let conversationId: string;

beforeAll(async () => {
  server = await startServer();
  const document = JSON.parse((await rawRequest({ url: server.url, method: 'GET', path: '/openapi.json' })).text) as { paths: Record<string, Record<string, { security?: unknown[] }>> };
  operations = Object.entries(document.paths).flatMap(([route, methods]) =>
    Object.entries(methods).map(([method, operation]) => ({ method: method.toUpperCase(), path: route, isPublic: Array.isArray(operation.security) && operation.security.length === 0 })),
  );
  conversationId = (await server.services.conversations.create({ max_iterations_per_run: 500, confirmation_mode: false })).conversation.id;
});
afterAll(async () => {
  await server?.close();
});

describe('auth cannot be routed around', () => {
  it('every protected route, by any method and any dressed-up path, without a usable key: 401 or no route', async () => {
    const protectedOperations = operations.filter((operation) => !operation.isPublic);
    expect(protectedOperations.length).toBeGreaterThan(30);
    const disguises = (path: string) => [
      path, `${path}/`, `/${path}`, `${path}?`, `${path};x`, `${path}%20`, `${path}/.`, `/docs/..${path}`, `/docs/%2e%2e${path}`, `/docs/.%2e${path}`,
      `/docs/static/..${path}`, `/docs/%2fstatic%2f..%2f..${path}`, `/alive/..${path}`, `/health/../.${path}`, `/openapi.json/..${path}`, `/openapi.json%23/..${path}`,
      `/ui/..${path}`, `/ui/%2e%2e${path}`, `/ui/app.js/..${path}`, `/ui/%2fapp.js%2f..%2f..${path}`,
    ];
    const keysThatDoNotCount: Array<{ query?: string; headers?: Record<string, string> }> = [
      {},
      { query: `ACCESS_TOKEN=${TEST_KEY}` },
      { query: `access_token[]=${TEST_KEY}` },
      { headers: { 'x-api-key': TEST_KEY, cookie: `authorization=Bearer ${TEST_KEY}`, 'proxy-authorization': `Bearer ${TEST_KEY}` } },
      { headers: { authorization: `Bearer ${TEST_KEY.toUpperCase()}` } },
    ];
    const wrong: string[] = [];
    let sent = 0;
    for (const operation of protectedOperations) {
      const path = operation.path.replace('{id}', conversationId).replace(/\{[^}]+\}/g, () => randomUUID());
      const methods = [operation.method, ...(operation.method === 'GET' ? ['HEAD'] : []), 'OPTIONS'];
      for (const method of methods) {
        for (const candidate of disguises(path)) {
          for (const { query, headers } of keysThatDoNotCount) {
            const target = query ? `${candidate}${candidate.includes('?') ? '&' : '?'}${query}` : candidate;
            const response = await rawRequest({ url: server.url, method, path: target, headers: { ...headers, ...(method === 'GET' || method === 'HEAD' ? {} : { 'content-type': 'application/json' }) }, ...(method === 'POST' || method === 'PUT' ? { body: '{}' } : {}) }).catch((error: Error) => ({ status: 0, text: error.message }));
            sent += 1;
            if (![400, 401, 403, 404].includes(response.status)) wrong.push(`${method} ${target} ${JSON.stringify(headers ?? {})} → ${response.status} ${response.text.slice(0, 100)}`);
            else if (candidate === path && response.status !== 401) wrong.push(`${method} ${target} → ${response.status}, expected 401`);
          }
        }
      }
    }
    expect(sent).toBeGreaterThan(5_000);
    expect(wrong).toEqual([]);
  });

  it('the stream routes take ?access_token= only with the right key; other routes never', async () => {
    for (const token of ['', 'wrong', `${TEST_KEY}x`, `%20${TEST_KEY}`, encodeURIComponent(`Bearer ${TEST_KEY}`)]) {
      for (const path of [`/conversations/${conversationId}/events/stream`, '/events/stream']) {
        const response = await rawRequest({ url: server.url, method: 'GET', path: `${path}?access_token=${token}` });
        expect(response.status, `${path} access_token=${token}`).toBe(401);
      }
    }
    const info = await rawRequest({ url: server.url, method: 'GET', path: `/info?access_token=${TEST_KEY}` });
    expect(info.status).toBe(401);
    // A wrong header is not rescued by a right access_token, nor the reverse on a stream route.
    const mixed = await rawRequest({ url: server.url, method: 'GET', path: `/events/stream?access_token=${TEST_KEY}&after_seq=x`, headers: { authorization: 'Bearer wrong' } });
    expect(mixed.status).toBe(401);
    const right = await rawRequest({ url: server.url, method: 'GET', path: `/events/stream?access_token=${TEST_KEY}&after_seq=x` });
    expect(right.status).toBe(400);
  });
});
