/**
 * The dashboard's files at /ui: public (they carry no data: the page asks for the key), served by
 * the server itself from its own files (no CDN), with a same-origin CSP, and absent from the
 * OpenAPI document (they are not part of the API). The browser tests are dashboard*.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, TEST_KEY, type TestServer } from '../support/agentd.js';

let server: TestServer;

beforeAll(async () => {
  server = await startServer({ listen: false });
});
afterAll(async () => {
  await server?.close();
});

describe('/ui', () => {
  it('serves the page without a key and with no data in it, under a strict same-origin CSP', async () => {
    const title = `secret-title-${Date.now()}`;
    await server.services.conversations.create({ title, max_iterations_per_run: 500, confirmation_mode: false });
    for (const url of ['/ui', '/ui/']) {
      const page = await server.app.inject({ method: 'GET', url });
      expect(page.statusCode).toBe(200);
      expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
      const csp = String(page.headers['content-security-policy']);
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).toContain("connect-src 'self'");
      expect(csp).toContain("frame-ancestors 'none'");
      expect(page.headers['x-content-type-options']).toBe('nosniff');
      expect(page.headers['referrer-policy']).toBe('no-referrer');
      expect(page.body).not.toContain(title);
      expect(page.body).not.toContain(TEST_KEY);
      // Every script and style is the server's own: nothing from a CDN.
      const references = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((match) => match[1]);
      expect(references.length).toBeGreaterThanOrEqual(3);
      for (const reference of references) expect(reference).toMatch(/^\/ui\/[a-z]+\.(js|css|svg)$/);
    }
    const script = await server.app.inject({ method: 'GET', url: '/ui/app.js' });
    expect(script.statusCode).toBe(200);
    expect(script.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(script.body).not.toMatch(/<script[^>]+src=["']https?:/);
    expect(script.body).not.toContain(title);
    const style = await server.app.inject({ method: 'GET', url: '/ui/app.css' });
    expect(style.headers['content-type']).toBe('text/css; charset=utf-8');
    expect(style.body).not.toMatch(/@import|url\(\s*['"]?https?:/);
  });

  it('answers 404 in the error shape for any other name', async () => {
    for (const url of ['/ui/missing.js', '/ui/constructor', '/ui/__proto__', '/ui/app.js.map']) {
      const response = await server.app.inject({ method: 'GET', url });
      expect(response.statusCode, url).toBe(404);
      expect(response.json()).toMatchObject({ error: 'not_found', details: null });
    }
  });

  it('is not an API operation: the OpenAPI document does not list it', async () => {
    const document = (await server.app.inject({ method: 'GET', url: '/openapi.json' })).json() as { paths: Record<string, unknown> };
    expect(Object.keys(document.paths).filter((path) => path.startsWith('/ui'))).toEqual([]);
  });
});

describe('GET /info firehose_cursor (where the dashboard joins the firehose)', () => {
  it('is the last cursor: the firehose from there sends only what happens next', async () => {
    const live = await startServer();
    try {
      const first = (await live.services.conversations.create({ max_iterations_per_run: 500, confirmation_mode: false })).conversation.id;
      for (let index = 0; index < 5; index += 1) live.services.recorder.append(first, { kind: 'message', source: 'user', role: 'user', content: `old ${index}` });
      const info = (await (await fetch(`${live.url}/info`, { headers: live.auth })).json()) as { firehose_cursor: number };
      expect(info.firehose_cursor).toBeGreaterThanOrEqual(5);
      const controller = new AbortController();
      const response = await fetch(`${live.url}/events/stream?after_seq=${info.firehose_cursor}`, { headers: live.auth, signal: controller.signal });
      live.services.recorder.append(first, { kind: 'message', source: 'user', role: 'user', content: 'new one' });
      const reader = response.body!.getReader();
      let text = '';
      while (!text.includes('new one')) text += new TextDecoder().decode((await reader.read()).value);
      controller.abort();
      expect(text).not.toContain('old ');
      expect(text).toContain(`id: ${info.firehose_cursor + 1}\n`);
    } finally {
      await live.close();
    }
  });
});
