/**
 * A conversation created without a title (the CLI sends none) takes one from its first user
 * message, on the server, so every client lists it by what it is about: the first line with text,
 * as stored (secrets masked), cut at a word past 80 characters. Saved: a restart keeps it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, tempDir, type TestServer } from '../support/agentd.js';

let servers: TestServer[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.close();
});

async function server(dataDir = tempDir()): Promise<TestServer> {
  const started = await startServer({ listen: false, dataDir });
  servers.push(started);
  return started;
}

async function call(target: TestServer, method: 'GET' | 'POST' | 'PUT', url: string, payload?: object): Promise<any> {
  const response = await target.app.inject({ method, url, headers: target.auth, ...(payload === undefined ? {} : { payload }) });
  expect(response.statusCode, response.body).toBeLessThan(300);
  return response.json();
}

describe('conversation titles from the first message', () => {
  it('titles an untitled conversation from its first message, keeps it after a restart and after later messages', async () => {
    const dataDir = tempDir();
    const first = await server(dataDir);
    const created = await call(first, 'POST', '/conversations', {});
    expect(created.title).toBeNull();
    await call(first, 'POST', `/conversations/${created.id}/messages`, { content: '\n\n  Fix the   failing\ttests in src/\nthen run them', run: false });
    expect((await call(first, 'GET', `/conversations/${created.id}`)).title).toBe('Fix the failing tests in src/');
    await call(first, 'POST', `/conversations/${created.id}/messages`, { content: 'another topic', run: false });
    const listed = await call(first, 'GET', '/conversations');
    expect(listed.items.find((item: { id: string }) => item.id === created.id).title).toBe('Fix the failing tests in src/');

    await first.close();
    servers = servers.filter((item) => item !== first);
    const second = await server(dataDir);
    expect((await call(second, 'GET', `/conversations/${created.id}`)).title).toBe('Fix the failing tests in src/');
  });

  it('titles from initial_message at creation, and saves it with the record', async () => {
    const dataDir = tempDir();
    const first = await server(dataDir);
    const created = await call(first, 'POST', '/conversations', { initial_message: 'Summarize the README', run: false });
    expect(created.title).toBe('Summarize the README');
    await first.close();
    servers = servers.filter((item) => item !== first);
    const second = await server(dataDir);
    expect((await call(second, 'GET', `/conversations/${created.id}`)).title).toBe('Summarize the README');
  });

  it('never replaces a title the client gave', async () => {
    const target = await server();
    const created = await call(target, 'POST', '/conversations', { title: 'my title', initial_message: 'something else', run: false });
    expect(created.title).toBe('my title');
    await call(target, 'POST', `/conversations/${created.id}/messages`, { content: 'and more', run: false });
    expect((await call(target, 'GET', `/conversations/${created.id}`)).title).toBe('my title');
  });

  it('masks a secret value in the title as in the message, and cuts a long line at a word', async () => {
    const target = await server();
    const value = 'tok-4f9a1c77e2b0';
    const created = await call(target, 'POST', '/conversations', { secrets: { DEPLOY_TOKEN: value } });
    await call(target, 'POST', `/conversations/${created.id}/messages`, { content: `deploy with ${value} please`, run: false });
    const titled = await call(target, 'GET', `/conversations/${created.id}`);
    expect(titled.title).toBe('deploy with <secret:DEPLOY_TOKEN> please');

    const long = `${'word '.repeat(30)}end`;
    const other = await call(target, 'POST', '/conversations', { initial_message: long, run: false });
    expect(other.title.length).toBeLessThanOrEqual(80);
    expect(other.title).toMatch(/^(word )+word…$/);
  });
});
