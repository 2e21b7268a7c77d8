/**
 * Issue: 60 conversations with 9.5 MB of `metadata` each made `GET /conversations` answer 500
 * (`Invalid string length`). Free-form fields are capped at creation, so a full list page stays
 * bounded and answers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from '../support/agentd.js';
import { expectError } from '../support/expect-error.js';
import { requestJson } from '../support/json-api.js';

let server: TestServer;

const call = (method: string, route: string, body?: unknown) => requestJson(server, method, route, body);

beforeAll(async () => {
  server = await startServer({ env: { AGENTD_MAX_BODY_BYTES: String(12 * 1024 * 1024) } });
});
afterAll(async () => {
  await server.close();
});

describe('metadata and other free-form fields are bounded', () => {
  it('refuses metadata past 16 KiB, and 9.5 MB of it, with a 400 that says why', async () => {
    expectError(await call('POST', '/conversations', { metadata: { blob: 'x'.repeat(16 * 1024) } }), { status: 400, error: 'validation_error', message: /metadata may hold at most 16 KiB of JSON/ });
    expectError(await call('POST', '/conversations', { metadata: { blob: 'x'.repeat(9_500_000) } }), { status: 400, error: 'validation_error', message: /metadata may hold at most 16 KiB/ });
    expectError(await call('POST', '/conversations', { title: 't'.repeat(501) }), { status: 400, error: 'validation_error', message: /title/ });
    expect((await call('GET', '/conversations/count')).body.count).toBe(0);
  });

  it('60 conversations with the most metadata allowed still list in one page', async () => {
    const metadata = { blob: 'm'.repeat(16 * 1024 - 20) };
    for (let i = 0; i < 60; i++) expect((await call('POST', '/conversations', { metadata, title: `t${i}` })).status).toBe(201);
    const page = await call('GET', '/conversations?limit=1000');
    expect(page.status).toBe(200);
    expect(page.body.items).toHaveLength(60);
    expect(page.body.items.every((item: { metadata: unknown }) => JSON.stringify(item.metadata) === JSON.stringify(metadata))).toBe(true);
  });
});
