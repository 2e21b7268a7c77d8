/**
 * Containment of the Files routes: every traversal payload of the shared corpus, over every file
 * route (as the wildcard path, as `?path=`, as a search pattern, as the upload target directory
 * and as upload file names), is refused with 400/403/404, never 2xx nor 5xx; the canary outside
 * the workdir is never read, overwritten or deleted, and nothing is written inside either.
 */
import { randomUUID } from 'node:crypto';
import { lstat, readdir, readlink } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from '../support/agentd.js';
import { rawRequest, type RawResponse } from '../support/raw-http.js';
import { CANARY_CONTENT, createTraversalFixture, SECRET_CONTENT, type TraversalFixture } from '../support/traversal-fixture.js';

let fixture: TraversalFixture;
let server: TestServer;
let conversationId: string;

type Encoding = 'exact' | 'raw';

/** exact: the server sees the payload itself after its one decode. raw: the payload's own %-escapes reach the server as they are. */
function encode(payload: string, encoding: Encoding): string {
  if (encoding === 'exact') return encodeURIComponent(payload);
  return [...payload].map((char) => (/^[\x21-\x7e]$/.test(char) && char !== '?' && char !== '#' ? char : encodeURIComponent(char))).join('');
}

/** RFC 5987 ext-value: busboy decodes `filename*=UTF-8''...` back to exactly the payload. */
function extValue(value: string): string {
  return encodeURIComponent(value).replace(/['()*]/g, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** A multipart body crafted by hand, so no client library sanitizes the file names. */
function multipart(files: Array<{ filenameParam: string; content: string }>): { body: Buffer; contentType: string } {
  const boundary = `agentd-${randomUUID()}`;
  const parts = files.map(
    (file) => `--${boundary}\r\nContent-Disposition: form-data; name="file"; ${file.filenameParam}\r\nContent-Type: application/octet-stream\r\n\r\n${file.content}\r\n`,
  );
  return { body: Buffer.from(`${parts.join('')}--${boundary}--\r\n`, 'utf8'), contentType: `multipart/form-data; boundary=${boundary}` };
}

function filenameParams(payload: string): string[] {
  const params = [`filename*=UTF-8''${extValue(payload)}`];
  if (!/[\x00-\x1f\x7f]/.test(payload)) params.push(`filename="${payload.replace(/[\\"]/g, (char) => `\\${char}`)}"`);
  return params;
}

/** Everything under the workdir, symlinks read but never followed. */
async function workdirSnapshot(): Promise<string[]> {
  const entries: string[] = [];
  const visit = async (directory: string, prefix: string): Promise<void> => {
    for (const dirent of await readdir(directory, { withFileTypes: true })) {
      const relative = prefix + dirent.name;
      const absolute = path.join(directory, dirent.name);
      if (dirent.isSymbolicLink()) entries.push(`${relative} -> ${await readlink(absolute)}`);
      else entries.push(`${relative} ${dirent.isDirectory() ? 'dir' : (await lstat(absolute)).size}`);
      if (dirent.isDirectory()) await visit(absolute, `${relative}/`);
    }
  };
  await visit(fixture.workdir, '');
  return entries.sort();
}

function send(options: { method: string; route: string; headers?: Record<string, string>; body?: Buffer }): Promise<RawResponse> {
  return rawRequest({ url: server.url, method: options.method, path: `/conversations/${conversationId}${options.route}`, headers: { ...server.auth, ...options.headers }, ...(options.body ? { body: options.body } : {}) });
}

const refusals: string[] = [];
function expectRefused(response: RawResponse, what: string): void {
  const leaked = response.text.includes(CANARY_CONTENT.trim()) || response.text.includes(SECRET_CONTENT.trim());
  if (![400, 403, 404].includes(response.status) || leaked) refusals.push(`${what} → ${response.status} ${response.text.slice(0, 160)}`);
  else {
    const body = JSON.parse(response.text) as { error?: unknown };
    if (typeof body.error !== 'string') refusals.push(`${what} → ${response.status} without the error shape`);
  }
}

beforeAll(async () => {
  fixture = await createTraversalFixture();
  server = await startServer();
  const response = await fetch(`${server.url}/conversations`, { method: 'POST', headers: { ...server.auth, 'content-type': 'application/json' }, body: JSON.stringify({ workdir: fixture.workdir }) });
  expect(response.status).toBe(201);
  conversationId = ((await response.json()) as { id: string }).id;
});
afterAll(async () => {
  await server?.close();
  await fixture?.cleanup();
});

describe('files routes: traversal corpus', () => {
  it('uses the shared corpus (>= 50 payloads) and reaches real files through both encodings (positive control)', async () => {
    expect(fixture.payloads.length).toBeGreaterThanOrEqual(50);
    for (const encoding of ['exact', 'raw'] as const) {
      const download = await send({ method: 'GET', route: `/files/${encode('src/a.txt', encoding)}` });
      expect([download.status, download.text]).toEqual([200, 'alpha\nbeta\n']);
      const inside = await send({ method: 'GET', route: `/files/${encode('link-in-file', encoding)}` });
      expect([inside.status, inside.text]).toEqual([200, 'alpha\nbeta\n']);
      const listing = await send({ method: 'GET', route: `/files?path=${encode('src', encoding)}` });
      expect(listing.status).toBe(200);
    }
  });

  it('refuses every payload on download, delete, mkdir, list, search and as the upload directory', async () => {
    const outsideBefore = await fixture.outsideSnapshot();
    const insideBefore = await workdirSnapshot();
    refusals.length = 0;
    const upload = multipart([{ filenameParam: 'filename="ok.txt"', content: 'fine' }]);
    for (const payload of fixture.payloads) {
      for (const encoding of ['exact', 'raw'] as const) {
        const encoded = encode(payload, encoding);
        const what = (route: string) => `${route} ${encoding} ${JSON.stringify(payload)}`;
        expectRefused(await send({ method: 'GET', route: `/files/${encoded}` }), what('download'));
        expectRefused(await send({ method: 'GET', route: `/files/${encoded}`, headers: { range: 'bytes=0-10' } }), what('ranged download'));
        expectRefused(await send({ method: 'DELETE', route: `/files/${encoded}` }), what('delete'));
        expectRefused(await send({ method: 'POST', route: `/dirs/${encoded}` }), what('mkdir'));
        expectRefused(await send({ method: 'GET', route: `/files?path=${encoded}` }), what('list'));
        expectRefused(await send({ method: 'GET', route: `/files?recursive=true&path=${encoded}` }), what('recursive list'));
        expectRefused(await send({ method: 'GET', route: `/files-search?pattern=${encoded}` }), what('search'));
        expectRefused(
          await send({ method: 'POST', route: `/files/upload?path=${encoded}`, headers: { 'content-type': upload.contentType }, body: upload.body }),
          what('upload dir'),
        );
      }
    }
    expect(refusals).toEqual([]);
    expect(await fixture.outsideSnapshot()).toBe(outsideBefore);
    await fixture.assertDecoysIntact();
    expect(await workdirSnapshot()).toEqual(insideBefore);
  });

  it('refuses every payload as an upload file name, and writes nothing of that request', async () => {
    const outsideBefore = await fixture.outsideSnapshot();
    const insideBefore = await workdirSnapshot();
    refusals.length = 0;
    let requests = 0;
    for (const payload of fixture.payloads) {
      for (const filenameParam of filenameParams(payload)) {
        // A valid file first: the batch is all or nothing, so it must not be left behind either.
        // (busboy drops a part whose file name holds a line break: alone, that part makes a 400 no_files.)
        const first = /[\r\n]/.test(payload) ? [] : [{ filenameParam: 'filename="first-ok.txt"', content: 'first' }];
        const { body, contentType } = multipart([...first, { filenameParam, content: `OVERWRITTEN by ${payload}` }]);
        const response = await send({ method: 'POST', route: '/files/upload', headers: { 'content-type': contentType }, body });
        expectRefused(response, `upload name ${filenameParam}`);
        requests += 1;
      }
    }
    expect(requests).toBeGreaterThan(fixture.payloads.length);
    expect(refusals).toEqual([]);
    expect(await fixture.outsideSnapshot()).toBe(outsideBefore);
    await fixture.assertDecoysIntact();
    expect(await workdirSnapshot()).toEqual(insideBefore);
  });

  it('keeps upload file names below the target directory, even where ".." stays inside the workdir', async () => {
    const insideBefore = await workdirSnapshot();
    for (const name of ['../escape.txt', 'a/../../escape.txt', './../escape.txt', '..', '.', '', 'x/..', '../sub/x.txt']) {
      for (const filenameParam of filenameParams(name)) {
        const { body, contentType } = multipart([{ filenameParam, content: 'x' }]);
        const response = await send({ method: 'POST', route: '/files/upload?path=sub', headers: { 'content-type': contentType }, body });
        expect([400, 403], `${filenameParam} → ${response.text}`).toContain(response.status);
      }
    }
    expect(await workdirSnapshot()).toEqual(insideBefore);
  });

  it('never leaves the workdir through symlinks in listings and searches of the whole tree', async () => {
    const listing = await send({ method: 'GET', route: '/files?recursive=true&limit=1000' });
    expect(listing.status).toBe(200);
    const paths = (JSON.parse(listing.text) as { items: Array<{ path: string; type: string }> }).items;
    // Symlinks are listed as themselves and never followed: nothing below link-out-dir or link-root.
    expect(paths.filter((item) => item.path.includes('/') && !item.path.startsWith('src/') && !item.path.startsWith('sub/'))).toEqual([]);
    expect(paths.find((item) => item.path === 'link-out-dir')).toMatchObject({ type: 'symlink' });
    for (const pattern of ['**', '**/*', '*/*', '**/secret.txt', '**/passwd', 'link-*/**', '{link-out-dir,link-etc}/*']) {
      const search = await send({ method: 'GET', route: `/files-search?limit=1000&pattern=${encodeURIComponent(pattern)}` });
      if (search.status === 200) {
        const items = (JSON.parse(search.text) as { items: Array<{ path: string }> }).items.map((item) => item.path);
        expect(items.filter((item) => item.includes('/') && !item.startsWith('src/') && !item.startsWith('sub/')), pattern).toEqual([]);
      } else {
        expect([400, 403], pattern).toContain(search.status);
      }
      expect(search.text).not.toContain(CANARY_CONTENT.trim());
    }
  });
});
