import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from '../support/agentd.js';
import { rawRequest } from '../support/raw-http.js';
import { fetchWithKey } from '../support/json-api.js';

const UPLOAD_LIMIT = 64 * 1024;

let server: TestServer;
let conversationId: string;
let workdir: string;

interface Entry {
  name: string;
  path: string;
  type: 'file' | 'directory' | 'symlink';
  size: number;
  modified_at: string;
}
interface EntryPage {
  items: Entry[];
  next_page_id: string | null;
}

const api = (route: string, init: RequestInit = {}) => fetchWithKey(server, `/conversations/${conversationId}${route}`, init);

function upload(files: Array<[name: string, content: Uint8Array | string]>, directory?: string): Promise<Response> {
  const form = new FormData();
  for (const [name, content] of files) form.append('file', new Blob([content]), name);
  const query = directory === undefined ? '' : `?path=${encodeURIComponent(directory)}`;
  return api(`/files/upload${query}`, { method: 'POST', body: form });
}

async function expectError(response: Response, status: number, code: string): Promise<void> {
  const body = (await response.json()) as { error: string; message: string; details: unknown };
  expect({ status: response.status, error: body.error }, body.message).toEqual({ status, error: code });
  expect(typeof body.message).toBe('string');
}

/** Every page of a listing or search, following next_page_id to the end. */
async function allPages(route: string, limit: number): Promise<{ paths: string[]; pages: number }> {
  const paths: string[] = [];
  let pageId: string | null = null;
  let pages = 0;
  do {
    const separator = route.includes('?') ? '&' : '?';
    const response = await api(`${route}${separator}limit=${limit}${pageId ? `&page_id=${pageId}` : ''}`);
    expect(response.status).toBe(200);
    const page = (await response.json()) as EntryPage;
    expect(page.items.length).toBeLessThanOrEqual(limit);
    paths.push(...page.items.map((item) => item.path));
    pageId = page.next_page_id;
    pages += 1;
  } while (pageId !== null && pages < 100);
  return { paths, pages };
}

function writeTree(root: string, files: string[]): void {
  for (const file of files) {
    fs.mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    fs.writeFileSync(path.join(root, file), `content of ${file}\n`);
  }
}

beforeAll(async () => {
  server = await startServer({ env: { AGENTD_MAX_UPLOAD_BYTES: String(UPLOAD_LIMIT) } });
  const response = await fetch(`${server.url}/conversations`, { method: 'POST', headers: { ...server.auth, 'content-type': 'application/json' }, body: '{}' });
  const conversation = (await response.json()) as { id: string; workdir: string };
  conversationId = conversation.id;
  workdir = conversation.workdir;
});
afterAll(async () => {
  await server.close();
});

describe('upload and download', () => {
  it('uploads two files in one request and downloads them byte-identical, with Content-Length and Content-Type', async () => {
    const text = 'hello, files\n';
    const binary = new Uint8Array(randomBytes(20_000));
    binary[0] = 0;
    const response = await upload([['notes.txt', text], ['blob.bin', binary]], 'up');
    expect(response.status).toBe(201);
    const { items } = (await response.json()) as { items: Entry[] };
    expect(items.map(({ name, path: entryPath, type, size }) => ({ name, path: entryPath, type, size }))).toEqual([
      { name: 'notes.txt', path: 'up/notes.txt', type: 'file', size: Buffer.byteLength(text) },
      { name: 'blob.bin', path: 'up/blob.bin', type: 'file', size: binary.length },
    ]);

    const textDownload = await api('/files/up/notes.txt');
    expect(textDownload.status).toBe(200);
    expect(textDownload.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(textDownload.headers.get('content-length')).toBe(String(Buffer.byteLength(text)));
    expect(textDownload.headers.get('content-disposition')).toContain('filename="notes.txt"');
    expect(await textDownload.text()).toBe(text);

    const binaryDownload = await api('/files/up/blob.bin');
    expect(binaryDownload.status).toBe(200);
    expect(binaryDownload.headers.get('content-type')).toBe('application/octet-stream');
    expect(binaryDownload.headers.get('content-length')).toBe(String(binary.length));
    expect(Buffer.from(await binaryDownload.arrayBuffer()).equals(Buffer.from(binary))).toBe(true);
    expect(fs.readdirSync(path.join(workdir, 'up')).sort()).toEqual(['blob.bin', 'notes.txt']); // no temp file left
  });

  it('creates the target directory and sub-directories named in file names; overwrites an existing file', async () => {
    expect((await upload([['a/b/deep.json', '{"v":1}']], 'made/here')).status).toBe(201);
    expect(fs.readFileSync(path.join(workdir, 'made/here/a/b/deep.json'), 'utf8')).toBe('{"v":1}');
    expect((await upload([['a/b/deep.json', '{"v":2}']], 'made/here')).status).toBe(201);
    const download = await api('/files/made/here/a/b/deep.json');
    expect(download.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(await download.text()).toBe('{"v":2}');
  });

  it('keeps non-ASCII file names, and offers them in Content-Disposition', async () => {
    const name = 'café ü (1).txt';
    expect((await upload([[name, 'unicode']], 'intl')).status).toBe(201);
    const download = await api(`/files/intl/${encodeURIComponent(name)}`);
    expect([download.status, await download.text()]).toEqual([200, 'unicode']);
    expect(download.headers.get('content-disposition')).toBe(`attachment; filename="caf_ _ (1).txt"; filename*=UTF-8''caf%C3%A9%20%C3%BC%20%281%29.txt`);
  });

  it('a file over the limit → 413, and nothing of the request is left on disk', async () => {
    const response = await upload([['small.txt', 'small'], ['large.bin', new Uint8Array(UPLOAD_LIMIT + 1)]], 'too-big/inner');
    await expectError(response, 413, 'payload_too_large');
    expect(fs.existsSync(path.join(workdir, 'too-big'))).toBe(false);

    fs.mkdirSync(path.join(workdir, 'existing'), { recursive: true });
    await expectError(await upload([['large.bin', new Uint8Array(UPLOAD_LIMIT * 3)]], 'existing'), 413, 'payload_too_large');
    expect(fs.readdirSync(path.join(workdir, 'existing'))).toEqual([]);
    // Exactly at the limit is fine.
    expect((await upload([['exact.bin', new Uint8Array(UPLOAD_LIMIT)]], 'existing')).status).toBe(201);
    expect(fs.statSync(path.join(workdir, 'existing/exact.bin')).size).toBe(UPLOAD_LIMIT);
  });

  it('refuses bodies that are not multipart (415), multipart without files or boundary (400), a file where the directory should be (409)', async () => {
    await expectError(await api('/files/upload', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }), 415, 'unsupported_media_type');
    await expectError(await api('/files/upload', { method: 'POST', headers: { 'content-type': 'multipart/form-data' }, body: '--x--' }), 400, 'invalid_multipart');
    const fieldsOnly = new FormData();
    fieldsOnly.append('note', 'no file here');
    await expectError(await api('/files/upload?path=nofiles', { method: 'POST', body: fieldsOnly }), 400, 'no_files');
    expect(fs.existsSync(path.join(workdir, 'nofiles'))).toBe(false);
    fs.writeFileSync(path.join(workdir, 'plain-file'), 'x');
    await expectError(await upload([['x.txt', 'x']], 'plain-file'), 409, 'not_a_directory');
    fs.mkdirSync(path.join(workdir, 'a-dir'), { recursive: true });
    await expectError(await upload([['a-dir', 'x']]), 409, 'path_is_directory');
  });

  it('serves single ranges (206), ignores multiple ranges (200), refuses unsatisfiable ones (416)', async () => {
    fs.writeFileSync(path.join(workdir, 'digits.txt'), '0123456789');
    const first = await api('/files/digits.txt', { headers: { range: 'bytes=2-5' } });
    expect(first.status).toBe(206);
    expect(first.headers.get('content-range')).toBe('bytes 2-5/10');
    expect(first.headers.get('content-length')).toBe('4');
    expect(await first.text()).toBe('2345');
    const suffix = await api('/files/digits.txt', { headers: { range: 'bytes=-3' } });
    expect([suffix.status, await suffix.text()]).toEqual([206, '789']);
    const open = await api('/files/digits.txt', { headers: { range: 'bytes=8-' } });
    expect([open.status, await open.text()]).toEqual([206, '89']);
    const multiple = await api('/files/digits.txt', { headers: { range: 'bytes=0-1,4-5' } });
    expect([multiple.status, await multiple.text()]).toEqual([200, '0123456789']);
    const beyond = await api('/files/digits.txt', { headers: { range: 'bytes=10-' } });
    expect(beyond.headers.get('content-range')).toBe('bytes */10');
    await expectError(beyond, 416, 'range_not_satisfiable');
    const head = await api('/files/digits.txt', { method: 'HEAD' });
    expect([head.status, head.headers.get('content-length'), await head.text()]).toEqual([200, '10', '']);
  });

  it('downloads an empty file; a directory → 400, a missing file → 404', async () => {
    fs.writeFileSync(path.join(workdir, 'empty.md'), '');
    const empty = await api('/files/empty.md');
    expect([empty.status, empty.headers.get('content-length'), empty.headers.get('content-type'), await empty.text()]).toEqual([200, '0', 'text/markdown; charset=utf-8', '']);
    await expectError(await api('/files/up'), 400, 'is_a_directory');
    await expectError(await api('/files/no/such/file.txt'), 404, 'path_not_found');
  });
});

describe('listing', () => {
  beforeAll(() => {
    writeTree(path.join(workdir, 'tree'), ['b.txt', 'a/z.txt', 'a/m/deep.txt', 'a/m/deeper/x.txt', 'c/only.txt', 'a.txt', 'a-b.txt', '.hidden']);
    fs.mkdirSync(path.join(workdir, 'tree/empty'));
    fs.symlinkSync('a', path.join(workdir, 'tree/link-to-a'));
  });

  it('lists one directory sorted by name, with name, path, type, size, modified_at', async () => {
    const response = await api('/files?path=tree');
    expect(response.status).toBe(200);
    const page = (await response.json()) as EntryPage;
    expect(page.next_page_id).toBeNull();
    expect(page.items.map((item) => [item.path, item.type])).toEqual([
      ['tree/.hidden', 'file'], ['tree/a', 'directory'], ['tree/a-b.txt', 'file'], ['tree/a.txt', 'file'], ['tree/b.txt', 'file'],
      ['tree/c', 'directory'], ['tree/empty', 'directory'], ['tree/link-to-a', 'symlink'],
    ]);
    const file = page.items.find((item) => item.path === 'tree/b.txt')!;
    expect(file).toEqual({ name: 'b.txt', path: 'tree/b.txt', type: 'file', size: 'content of b.txt\n'.length, modified_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) });
  });

  it('walks small pages to the end, flat and recursive (depth-first, symlinks not followed)', async () => {
    const flat = await allPages('/files?path=tree', 3);
    expect(flat.pages).toBe(3);
    expect(flat.paths).toHaveLength(8);
    const recursive = await allPages('/files?path=tree&recursive=true', 2);
    expect(recursive.paths).toEqual([
      'tree/.hidden', 'tree/a', 'tree/a/m', 'tree/a/m/deep.txt', 'tree/a/m/deeper', 'tree/a/m/deeper/x.txt', 'tree/a/z.txt',
      'tree/a-b.txt', 'tree/a.txt', 'tree/b.txt', 'tree/c', 'tree/c/only.txt', 'tree/empty', 'tree/link-to-a',
    ]);
    const oneByOne = await allPages('/files?path=tree&recursive=true', 1);
    expect(oneByOne.paths).toEqual(recursive.paths);
  });

  it('resumes after an entry deleted between pages', async () => {
    writeTree(path.join(workdir, 'shrinking'), ['1.txt', '2/a.txt', '2/b.txt', '3.txt']);
    const first = (await (await api('/files?path=shrinking&recursive=true&limit=2')).json()) as EntryPage;
    expect(first.items.map((item) => item.path)).toEqual(['shrinking/1.txt', 'shrinking/2']);
    fs.rmSync(path.join(workdir, 'shrinking/2'), { recursive: true });
    const second = (await (await api(`/files?path=shrinking&recursive=true&limit=2&page_id=${first.next_page_id}`)).json()) as EntryPage;
    expect(second.items.map((item) => item.path)).toEqual(['shrinking/3.txt']);
  });

  it('refuses a page_id from another listing, a file as the directory, a missing directory', async () => {
    const first = (await (await api('/files?path=tree&limit=1')).json()) as EntryPage;
    await expectError(await api(`/files?path=tree/a&limit=1&page_id=${first.next_page_id}`), 400, 'invalid_page_id');
    await expectError(await api('/files?page_id=garbage'), 400, 'invalid_page_id');
    await expectError(await api('/files?path=tree/b.txt'), 400, 'not_a_directory');
    await expectError(await api('/files?path=tree/nope'), 404, 'path_not_found');
  });
});

describe('delete and mkdir', () => {
  it('deletes a file and a directory with its contents (204), then 404', async () => {
    writeTree(path.join(workdir, 'doomed'), ['f.txt', 'sub/g.txt']);
    const deleted = await api('/files/doomed/f.txt', { method: 'DELETE' });
    expect([deleted.status, await deleted.text()]).toEqual([204, '']);
    expect(fs.existsSync(path.join(workdir, 'doomed/f.txt'))).toBe(false);
    expect((await api('/files/doomed', { method: 'DELETE' })).status).toBe(204);
    expect(fs.existsSync(path.join(workdir, 'doomed'))).toBe(false);
    await expectError(await api('/files/doomed', { method: 'DELETE' }), 404, 'path_not_found');
  });

  it('deletes a symlink itself, never its target', async () => {
    writeTree(workdir, ['kept/target.txt']);
    fs.symlinkSync('kept', path.join(workdir, 'link-dir'));
    fs.symlinkSync('kept/target.txt', path.join(workdir, 'link-file'));
    expect((await api('/files/link-dir', { method: 'DELETE' })).status).toBe(204);
    expect((await api('/files/link-file', { method: 'DELETE' })).status).toBe(204);
    expect(fs.existsSync(path.join(workdir, 'link-dir')) || fs.existsSync(path.join(workdir, 'link-file'))).toBe(false);
    expect(fs.readFileSync(path.join(workdir, 'kept/target.txt'), 'utf8')).toBe('content of kept/target.txt\n');
  });

  it('refuses to delete the workdir root, however it is spelled', async () => {
    // Sent raw: fetch would resolve the dot segments itself.
    for (const spelling of ['.', './', '%2e', '.%2f.']) {
      const response = await rawRequest({ url: server.url, method: 'DELETE', path: `/conversations/${conversationId}/files/${spelling}`, headers: server.auth });
      expect([response.status, JSON.parse(response.text).error], spelling).toEqual([400, 'workdir_root_not_deletable']);
    }
    // `..` is refused, never resolved: `kept/..` is not the root (nor `sub/file/..` its directory).
    for (const spelling of ['kept/..', 'kept/./..', 'kept/%2e%2e', 'kept%2f..', 'kept/target.txt/..']) {
      const response = await rawRequest({ url: server.url, method: 'DELETE', path: `/conversations/${conversationId}/files/${spelling}`, headers: server.auth });
      expect([response.status, JSON.parse(response.text).error], spelling).toEqual([400, 'invalid_path']);
    }
    expect(fs.existsSync(workdir)).toBe(true);
    expect(fs.readFileSync(path.join(workdir, 'kept/target.txt'), 'utf8')).toBe('content of kept/target.txt\n');
  });

  it('mkdir -p: 201 when created, 200 when it existed, 409 over a file', async () => {
    const created = await api('/dirs/new/nested/dir', { method: 'POST' });
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ name: 'dir', path: 'new/nested/dir', type: 'directory' });
    expect(fs.statSync(path.join(workdir, 'new/nested/dir')).isDirectory()).toBe(true);
    expect((await api('/dirs/new/nested', { method: 'POST' })).status).toBe(200);
    fs.writeFileSync(path.join(workdir, 'new/file'), 'x');
    await expectError(await api('/dirs/new/file', { method: 'POST' }), 409, 'not_a_directory');
    await expectError(await api('/dirs/new/file/below', { method: 'POST' }), 409, 'not_a_directory');
  });
});

describe('search', () => {
  beforeAll(() => {
    writeTree(path.join(workdir, 'proj'), ['src/a.ts', 'src/b.ts', 'src/lib/c.ts', 'src/lib/d.js', 'test/a.test.ts', 'README.md', 'node_modules/x/index.ts', '.git/config.ts']);
  });

  it('finds paths matching a glob, paginated to the end, skipping node_modules and .git', async () => {
    const all = await allPages(`/files-search?pattern=${encodeURIComponent('proj/**/*.ts')}`, 2);
    expect(all.paths).toEqual(['proj/src/a.ts', 'proj/src/b.ts', 'proj/src/lib/c.ts', 'proj/test/a.test.ts']);
    const shallow = await allPages(`/files-search?pattern=${encodeURIComponent('proj/src/*.{ts,js}')}`, 10);
    expect(shallow.paths).toEqual(['proj/src/a.ts', 'proj/src/b.ts']);
    const named = await allPages(`/files-search?pattern=${encodeURIComponent('proj/node_modules/**/*.ts')}`, 10);
    expect(named.paths).toEqual(['proj/node_modules/x/index.ts']);
    const literal = await allPages(`/files-search?pattern=${encodeURIComponent('proj/README.md')}`, 10);
    expect(literal.paths).toEqual(['proj/README.md']);
    const missingBase = await allPages(`/files-search?pattern=${encodeURIComponent('nowhere/**')}`, 10);
    expect(missingBase.paths).toEqual([]);
  });

  it('refuses invalid globs and ".." segments', async () => {
    await expectError(await api(`/files-search?pattern=${encodeURIComponent('{'.repeat(20) + 'a,b' + '}'.repeat(20) + '{a,b}'.repeat(12))}`), 400, 'invalid_glob');
    await expectError(await api(`/files-search?pattern=${encodeURIComponent('proj/../**')}`), 400, 'invalid_path');
    await expectError(await api('/files-search'), 400, 'validation_error');
  });
});

describe('unknown conversation', () => {
  it('every files route answers 404 conversation_not_found', async () => {
    const other = randomUUID();
    const url = (route: string) => `${server.url}/conversations/${other}${route}`;
    const form = new FormData();
    form.append('file', new Blob(['x']), 'x.txt');
    const requests: Array<[string, RequestInit]> = [
      [url('/files/upload'), { method: 'POST', body: form }],
      [url('/files'), {}],
      [url('/files/a.txt'), {}],
      [url('/files/a.txt'), { method: 'DELETE' }],
      [url('/dirs/a'), { method: 'POST' }],
      [url('/files-search?pattern=*'), {}],
    ];
    for (const [target, init] of requests) {
      await expectError(await fetch(target, { ...init, headers: server.auth }), 404, 'conversation_not_found');
    }
  });
});

describe('one upload batch writes each path once', () => {
  it('refuses a name sent twice, and a path that would be both a file and a directory, leaving nothing behind', async () => {
    const before = await (await api('/files?recursive=true')).text();
    await expectError(await upload([['twice.txt', 'first'], ['twice.txt', 'second']]), 400, 'duplicate_upload_name');
    await expectError(await upload([['a', 'a file'], ['a/b', 'inside a']]), 400, 'upload_path_conflict');
    await expectError(await upload([['c/d', 'inside c'], ['c', 'a file']]), 400, 'upload_path_conflict');
    await expectError(await upload([['x/y/z.txt', 'deep'], ['x/y', 'a file']]), 400, 'upload_path_conflict');
    expect(await (await api('/files?recursive=true')).text()).toBe(before);
    // Distinct paths in one batch are fine.
    expect((await upload([['e/f.txt', '1'], ['e/g.txt', '2'], ['e.txt', '3']])).status).toBe(201);
  });
});
