/**
 * Issue 11, item 1 (second half): nothing the server creates in a workdir for the agent is owned
 * by root, and a file the server writes keeps no set-id bit. As root, the test gives its own
 * temp workdir to an unprivileged uid (as a sandbox does for its agent) and checks what uploads,
 * mkdir and file_editor leave there.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileEditorTool } from '../../src/core/tools/file-editor.js';
import { startServer, tempDir, type TestServer } from '../support/agentd.js';
import { NodeWorkdirFileSystem } from '../../src/adapters/workspace/node-workdir-file-system.js';

const asRoot = process.geteuid?.() === 0;
if (!asRoot) console.warn('test/sandbox/server-written-owner.test.ts: skipped (only a server running as root creates files for another uid)');

const AGENT_UID = 61_234;
const AGENT_GID = 61_234;
let server: TestServer;
let workdir: string;
let conversationId: string;

beforeAll(async () => {
  if (!asRoot) return;
  workdir = path.join(fs.realpathSync(tempDir()), 'work');
  fs.mkdirSync(workdir);
  fs.chownSync(workdir, AGENT_UID, AGENT_GID);
  server = await startServer();
  const created = await fetch(`${server.url}/conversations`, { method: 'POST', headers: { ...server.auth, 'content-type': 'application/json' }, body: JSON.stringify({ workdir }) });
  conversationId = ((await created.json()) as { id: string }).id;
});

afterAll(async () => server?.close());

describe.skipIf(!asRoot)('what the server writes into a workdir', () => {
  it("belongs to the workdir's owner: uploads, their new directories, mkdir -p, file_editor create", async () => {
    const form = new FormData();
    form.append('file', new Blob(['data']), 'deep/er/up.txt');
    const upload = await fetch(`${server.url}/conversations/${conversationId}/files/upload?path=in`, { method: 'POST', headers: server.auth, body: form });
    expect(upload.status).toBe(201);
    const made = await fetch(`${server.url}/conversations/${conversationId}/dirs/m1/m2`, { method: 'POST', headers: server.auth });
    expect(made.status).toBe(201);
    const context = { workdir, workdirFs: new NodeWorkdirFileSystem(), signal: new AbortController().signal, state: new Map() } as unknown as Parameters<typeof fileEditorTool.execute>[1];
    const created = await fileEditorTool.execute({ command: 'create', path: 'e1/e2/edited.txt', file_text: 'hello\n' } as never, context);
    expect(created.isError).toBe(false);
    const owners = ['in', 'in/deep', 'in/deep/er', 'in/deep/er/up.txt', 'm1', 'm1/m2', 'e1', 'e1/e2', 'e1/e2/edited.txt'].map((entry) => {
      const stats = fs.lstatSync(path.join(workdir, entry));
      return `${entry} ${stats.uid}:${stats.gid}`;
    });
    expect(owners).toEqual(owners.map((line) => `${line.split(' ')[0]} ${AGENT_UID}:${AGENT_GID}`));
  });

  it('never keeps a set-id bit on a file it writes', async () => {
    const file = path.join(workdir, 'setuid-tool');
    fs.writeFileSync(file, 'echo one\n');
    fs.chownSync(file, AGENT_UID, AGENT_GID);
    fs.chmodSync(file, 0o4755);
    const context = { workdir, workdirFs: new NodeWorkdirFileSystem(), signal: new AbortController().signal, state: new Map() } as unknown as Parameters<typeof fileEditorTool.execute>[1];
    const edited = await fileEditorTool.execute({ command: 'str_replace', path: 'setuid-tool', old_str: 'one', new_str: 'two' } as never, context);
    expect(edited.isError).toBe(false);
    const stats = fs.statSync(file);
    expect((stats.mode & 0o7777).toString(8)).toBe('755');
    expect(stats.uid).toBe(AGENT_UID);
  });
});
