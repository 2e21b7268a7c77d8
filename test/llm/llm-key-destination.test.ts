/**
 * Issue: `PUT /config` with only a new `llm.base_url` kept the key (the server's default, or the
 * conversation's own), which the server then sent to that URL. Two fake LLM endpoints on
 * 127.0.0.1 record the Authorization header each one receives.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { startServer, type TestServer } from '../support/agentd.js';
import { requestJson } from '../support/json-api.js';

const DEFAULT_KEY = 'sk-server-default-key-0000000000';
const OWN_KEY = 'sk-conversation-own-key-11111111';
let server: TestServer | undefined;
const fakes: FakeLlm[] = [];

afterEach(async () => {
  await server?.close();
  server = undefined;
  for (const fake of fakes.splice(0)) await fake.close();
});

const call = (method: string, route: string, body?: unknown) => requestJson(server!, method, route, body);

async function runOnce(id: string): Promise<void> {
  expect((await call('POST', `/conversations/${id}/messages`, { content: 'hello' })).status).toBe(202);
  const until = Date.now() + 15_000;
  while (Date.now() < until) {
    const status = (await call('GET', `/conversations/${id}`)).body.status;
    if (status !== 'running') return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error('the run did not end within 15 s');
}

const authorizations = (fake: FakeLlm) => fake.requests.map((request) => request.headers.authorization ?? null);

describe('a changed base_url never inherits a key the client did not give', () => {
  it('the server default key stays with the default endpoint', async () => {
    const trusted = await startFakeLlm([{ text: 'from the default endpoint' }]);
    const other = await startFakeLlm([{ text: 'from another endpoint' }]);
    fakes.push(trusted, other);
    server = await startServer({ env: { AGENTD_LLM_MODEL: 'm', AGENTD_LLM_BASE_URL: trusted.url, AGENTD_LLM_API_KEY: DEFAULT_KEY } });
    const id = (await call('POST', '/conversations', {})).body.id as string;
    await runOnce(id);
    expect(authorizations(trusted)).toEqual([`Bearer ${DEFAULT_KEY}`]);

    const updated = await call('PUT', `/conversations/${id}/config`, { llm: { base_url: other.url } });
    expect(updated.status).toBe(200);
    expect(updated.body.llm).toMatchObject({ base_url: other.url, api_key: null });
    await runOnce(id);
    expect(other.requests).toHaveLength(1);
    expect(authorizations(other)).not.toContain(`Bearer ${DEFAULT_KEY}`);
  });

  it("the conversation's own key too; a key given with the new URL is used; the same URL keeps the key", async () => {
    const first = await startFakeLlm([{ text: 'one' }, { text: 'two' }]);
    const second = await startFakeLlm([{ text: 'three' }, { text: 'four' }]);
    fakes.push(first, second);
    server = await startServer();
    const id = (await call('POST', '/conversations', { llm: { model: 'm', base_url: first.url, api_key: OWN_KEY } })).body.id as string;
    await runOnce(id);
    // Re-sending the same base_url (with another field) is no change of destination.
    expect((await call('PUT', `/conversations/${id}/config`, { llm: { base_url: first.url, temperature: 0.5 } })).body.llm.api_key).toBe('**********');
    await runOnce(id);
    expect(authorizations(first)).toEqual([`Bearer ${OWN_KEY}`, `Bearer ${OWN_KEY}`]);

    expect((await call('PUT', `/conversations/${id}/config`, { llm: { base_url: second.url } })).body.llm.api_key).toBeNull();
    await runOnce(id);
    expect(authorizations(second)).not.toContain(`Bearer ${OWN_KEY}`);

    expect((await call('PUT', `/conversations/${id}/config`, { llm: { base_url: second.url, api_key: 'sk-given-with-the-url' } })).status).toBe(200);
    await runOnce(id);
    expect(authorizations(second).at(-1)).toBe('Bearer sk-given-with-the-url');
  });
});
