/**
 * Issue 11, item 2: a hostile agent swaps a directory of its workdir with a symlink to a
 * directory outside (a decoy standing in for the data dir) in a tight loop, with
 * renameat2(RENAME_EXCHANGE), while a client downloads, uploads, lists and deletes through that
 * directory and the agent's file_editor reads and writes there. Whatever the timing, nothing
 * outside the workdir is read, listed, written or deleted: the decoy stays byte for byte as it
 * was, and no answer carries its content or names.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fileEditorTool } from '../../src/core/tools/file-editor.js';
import { findInPath } from '../../src/adapters/sandbox/mounts.js';
import { startAgentHarness } from '../support/agent-harness.js';
import { startServer, tempDir, type TestServer } from '../support/agentd.js';

const python = findInPath('python3', process.env.PATH ?? '/usr/bin:/bin');
if (!python) console.warn('test/http/files-race.test.ts: skipped (python3, which performs the renameat2 swaps, is not installed)');

const DECOY_SECRET = 'DECOY-SECRET-never-served';
const INSIDE_SECRET = 'inside-secret';
const ROUNDS = 300;

import { NodeWorkdirFileSystem } from '../../src/adapters/workspace/node-workdir-file-system.js';
import { fetchWithKey } from '../support/json-api.js';
import { ownedSnapshot, RACER } from '../support/rename-race.js';

let server: TestServer;
let base: string;
let workdir: string;
let decoy: string;
let conversationId: string;
let decoyBefore: string;
let racer: ChildProcess | undefined;

function startRacer(seconds: number): void {
  racer = spawn(python as string, ['-c', RACER, path.join(workdir, 'sub'), path.join(workdir, 'swap'), String(seconds)], { stdio: 'ignore' });
}

async function stopRacer(): Promise<void> {
  if (!racer || racer.exitCode !== null || racer.signalCode !== null) return;
  const exited = new Promise((resolve) => racer?.once('exit', resolve));
  racer.kill('SIGKILL');
  await exited;
}

async function call(method: string, route: string, init: { body?: FormData | string; headers?: Record<string, string> } = {}): Promise<{ status: number; text: string }> {
  const response = await fetchWithKey(server, `/conversations/${conversationId}${route}`, { method, ...init });
  return { status: response.status, text: await response.text() };
}

beforeAll(async () => {
  base = fs.realpathSync(tempDir());
  workdir = path.join(base, 'work');
  decoy = path.join(base, 'decoy-data-dir');
  fs.mkdirSync(path.join(workdir, 'sub'), { recursive: true });
  fs.mkdirSync(decoy);
  fs.writeFileSync(path.join(decoy, 'secret.key'), DECOY_SECRET);
  fs.writeFileSync(path.join(decoy, 'decoy-only-name.txt'), 'x');
  fs.mkdirSync(path.join(decoy, 'conversations'));
  for (let index = 0; index < ROUNDS; index++) fs.writeFileSync(path.join(decoy, `victim-${index}.txt`), 'decoy victim');
  fs.writeFileSync(path.join(workdir, 'sub', 'secret.key'), INSIDE_SECRET);
  for (let index = 0; index < ROUNDS; index++) fs.writeFileSync(path.join(workdir, 'sub', `victim-${index}.txt`), 'inside victim');
  fs.symlinkSync(decoy, path.join(workdir, 'swap'));
  decoyBefore = ownedSnapshot(decoy);
  server = await startServer();
  const created = await fetch(`${server.url}/conversations`, { method: 'POST', headers: { ...server.auth, 'content-type': 'application/json' }, body: JSON.stringify({ workdir }) });
  expect(created.status).toBe(201);
  conversationId = ((await created.json()) as { id: string }).id;
});

afterAll(async () => {
  await stopRacer();
  await server?.close();
});

describe.skipIf(!python)('a directory swapped with a symlink to the data dir in a loop', () => {
  it('the files API never reads, lists, writes or deletes outside the workdir', { timeout: 120_000 }, async () => {
    startRacer(60);
    const leaks: string[] = [];
    let served = 0;
    for (let index = 0; index < ROUNDS; index++) {
      const download = await call('GET', '/files/sub/secret.key');
      if (download.text.includes(DECOY_SECRET)) leaks.push(`download ${index}: ${download.status}`);
      if (download.status === 200) served += 1;
      const listing = await call('GET', '/files?path=sub');
      if (listing.text.includes('decoy-only-name')) leaks.push(`listing ${index}`);
      const search = await call('GET', `/files-search?pattern=${encodeURIComponent('sub/*')}`);
      if (search.text.includes('decoy-only-name')) leaks.push(`search ${index}`);
      const form = new FormData();
      form.append('file', new Blob(['planted']), `planted-${index}.txt`);
      const upload = await call('POST', '/files/upload?path=sub', { body: form });
      if (upload.status >= 500) leaks.push(`upload ${index}: ${upload.status} ${upload.text}`);
      const removed = await call('DELETE', `/files/sub/victim-${index}.txt`);
      if (removed.status >= 500) leaks.push(`delete ${index}: ${removed.status} ${removed.text}`);
      const made = await call('POST', `/dirs/sub/made-${index}`);
      if (made.status >= 500) leaks.push(`mkdir ${index}: ${made.status} ${made.text}`);
    }
    await stopRacer();
    expect(leaks).toEqual([]);
    expect(ownedSnapshot(decoy)).toBe(decoyBefore);
    // The race ran: the inside file was served in some rounds (and refused or 404 in others).
    expect(served).toBeGreaterThan(0);
  });

  it("the agent's file_editor never shows or writes a file outside the workdir", { timeout: 120_000 }, async () => {
    startRacer(60);
    const context = { workdir, workdirFs: new NodeWorkdirFileSystem(), signal: new AbortController().signal, state: new Map() } as unknown as Parameters<typeof fileEditorTool.execute>[1];
    const leaks: string[] = [];
    for (let index = 0; index < ROUNDS; index++) {
      const viewed = await fileEditorTool.execute({ command: 'view', path: 'sub/secret.key' } as never, context);
      if (viewed.content.includes(DECOY_SECRET)) leaks.push(`view ${index}`);
      const listed = await fileEditorTool.execute({ command: 'view', path: 'sub' } as never, context);
      if (listed.content.includes('decoy-only-name')) leaks.push(`view dir ${index}`);
      await fileEditorTool.execute({ command: 'create', path: `sub/created-${index}.txt`, file_text: 'planted' } as never, context);
      await fileEditorTool.execute({ command: 'create', path: 'sub/secret.key', file_text: INSIDE_SECRET } as never, context);
    }
    await stopRacer();
    expect(leaks).toEqual([]);
    expect(ownedSnapshot(decoy)).toBe(decoyBefore);
  });

  it("the agent's grep, run in the sandbox, never finds text outside the workdir", { timeout: 120_000 }, async (context) => {
    const harness = await startAgentHarness();
    try {
      const info = (await harness.get('/info')).body as { sandbox?: { mode?: string } };
      if (info.sandbox?.mode !== 'bwrap') {
        console.warn('test/http/files-race.test.ts: the grep race is only closed in a bubblewrap sandbox; this server runs without one');
        context.skip();
      }
      const calls = 30;
      // Each call differs, in its pattern and in how it spells the path, so that neither a repeated call
      // nor the same error again and again (`sub` is missing while swapped) reads as a stuck loop.
      for (let index = 0; index < calls; index++) harness.llm.push({ toolCalls: [{ name: 'grep', arguments: { pattern: `SECRET|secret|no-such-text-${index}`, path: `${'./'.repeat(index)}sub` } }] });
      // Then the race stops, `sub` is the workdir's own directory again, and one more grep must
      // find the inside file: rg does search there, so the raced calls' silence is the sandbox's.
      harness.llm.push(async () => {
        await stopRacer();
        if (fs.lstatSync(path.join(workdir, 'sub')).isSymbolicLink()) {
          fs.renameSync(path.join(workdir, 'sub'), path.join(workdir, 'swap-back'));
          fs.renameSync(path.join(workdir, 'swap'), path.join(workdir, 'sub'));
          fs.renameSync(path.join(workdir, 'swap-back'), path.join(workdir, 'swap'));
        }
        return { toolCalls: [{ name: 'grep', arguments: { pattern: 'SECRET|secret|after-the-race', path: 'sub' } }] };
      });
      harness.llm.push({ text: 'done' });
      startRacer(120);
      const id = await harness.createConversation({ workdir, initial_message: 'search' });
      await harness.waitForStatus(id, ['idle', 'error', 'stuck'], 90_000);
      await stopRacer();
      const observations = (await harness.events(id)).filter((event) => event.kind === 'observation');
      expect(observations).toHaveLength(calls + 1);
      expect(observations.filter((event) => JSON.stringify(event).includes(DECOY_SECRET))).toEqual([]);
      expect(observations.at(-1).content, observations.at(-1).content).toContain(INSIDE_SECRET);
      expect(ownedSnapshot(decoy)).toBe(decoyBefore);
    } finally {
      await stopRacer();
      await harness.close();
    }
  });
});
