/**
 * One server per data dir: a second start on a data dir in use exits with one line naming the
 * holder's pid, before it reads or writes anything there; a holder killed with -9 leaves no stale
 * lock; two starters racing on the same dir: exactly one wins.
 */
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { spawn, spawnSync } from 'node:child_process';
import { DataDirInUseError, DataDirLock } from '../../src/adapters/files/data-dir-lock.js';
import { readProcess } from '../../src/adapters/process/process-tree.js';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort, spawnServer, tempDir, TEST_KEY, type SpawnedServer } from '../support/agentd.js';
import { requestJson } from '../support/json-api.js';

const CLI = path.resolve(import.meta.dirname, '../../dist/cli.js');
const running: SpawnedServer[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const server of running.splice(0)) {
    server.child.kill('SIGKILL');
    await server.exited;
  }
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** Every file under `dir` with its bytes (hex-free: compared as buffers). */
function snapshot(dir: string): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  for (const entry of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    files.set(path.relative(dir, file), fs.readFileSync(file));
  }
  return files;
}

/**
 * The snapshot once the live server has finished writing: the audit log's entry for a request is
 * appended after its answer, so two snapshots 100 ms apart must agree first.
 */
async function settledSnapshot(dir: string): Promise<Map<string, Buffer>> {
  let last = snapshot(dir);
  for (let i = 0; i < 50; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const next = snapshot(dir);
    if (equalSnapshots(next, last)) return next;
    last = next;
  }
  return last;
}

function equalSnapshots(a: Map<string, Buffer>, b: Map<string, Buffer>): boolean {
  return a.size === b.size && [...a].every(([file, bytes]) => b.get(file)?.equals(bytes) === true);
}

/** Runs the CLI until it exits (it must, the dir being taken); returns its code and output. */
async function startExpectingExit(dataDir: string): Promise<{ code: number | null; output: string }> {
  const port = await freePort();
  const child = spawn(process.execPath, [CLI, '--port', String(port), '--data-dir', dataDir], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', AGENTD_MASTER_KEY: TEST_KEY, AGENTD_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  // A server that does not exit is the failure: stop it so that the assertion says so.
  const deadline = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  clearTimeout(deadline);
  return { code, output };
}


describe('one server per data dir', () => {
  it('refuses a second server on a live data dir without touching it, and takes over after kill -9', { timeout: 60_000 }, async () => {
    const dataDir = tempDir('agentd-lock-');
    dirs.push(dataDir);
    const first = await spawnServer({ dataDir });
    running.push(first);
    const created = await requestJson(first, 'POST', '/conversations', { title: 'live', initial_message: 'hello', run: false });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    for (let i = 0; i < 5; i++) expect((await requestJson(first, 'POST', `/conversations/${id}/messages`, { content: `m${i}`, run: false })).status).toBe(202);
    const before = await settledSnapshot(dataDir);
    expect([...before.keys()]).toContain(`conversations/${id}/events.jsonl`);

    const second = await startExpectingExit(dataDir);
    expect(second.code).toBe(1);
    const lines = second.output.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^agentd: data dir .* is in use by agentd pid ${first.child.pid} `));

    // Nothing of the live server's data changed, and it keeps answering and appending.
    expect(snapshot(dataDir)).toEqual(before);
    const appended = await requestJson(first, 'POST', `/conversations/${id}/messages`, { content: 'after', run: false });
    expect(appended.status).toBe(202);
    expect((appended.body.event as { seq: number }).seq).toBe(7);

    // kill -9: the kernel drops the lock with the process; the next start takes the dir.
    first.child.kill('SIGKILL');
    await first.exited;
    running.splice(running.indexOf(first), 1);
    const third = await spawnServer({ dataDir });
    running.push(third);
    const events = (await requestJson(third, 'GET', `/conversations/${id}/events?limit=100`)).body as { items: { seq: number }[] };
    expect(events.items.map((event) => event.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

  it('lets exactly one of two servers racing for a dir left by a killed server win', { timeout: 180_000 }, async () => {
    const dataDir = tempDir('agentd-lock-race-');
    dirs.push(dataDir);
    const killed = await spawnServer({ dataDir });
    killed.child.kill('SIGKILL');
    await killed.exited;
    expect(fs.readFileSync(path.join(dataDir, 'agentd.lock'), 'utf8')).toContain(`"pid":${killed.child.pid}`);

    for (let round = 0; round < 3; round++) {
      const results = await Promise.allSettled([spawnServer({ dataDir }), spawnServer({ dataDir })]);
      const winners = results.filter((result): result is PromiseFulfilledResult<SpawnedServer> => result.status === 'fulfilled').map((result) => result.value);
      const losers = results.filter((result): result is PromiseRejectedResult => result.status === 'rejected');
      running.push(...winners);
      expect(winners).toHaveLength(1);
      expect(String(losers[0]!.reason)).toContain(`is in use by agentd pid ${winners[0]!.child.pid} `);
      winners[0]!.child.kill('SIGKILL');
      await winners[0]!.exited;
      running.splice(running.indexOf(winners[0]!), 1);
    }
  });

  it('names only a live holder: a note left by a dead process is not believed', { timeout: 30_000 }, async () => {
    const dataDir = tempDir('agentd-lock-note-');
    dirs.push(dataDir);
    const file = path.join(dataDir, 'agentd.lock');
    fs.writeFileSync(file, '');
    // Another process holds the lock (`sleep`, on a descriptor locked with util-linux flock and then
    // given to it alone), and the note names a dead pid.
    const fd = fs.openSync(file, 'r+');
    expect(spawnSync('flock', ['-x', '-n', '3'], { stdio: ['ignore', 'ignore', 'ignore', fd] }).status).toBe(0);
    const holder = spawn('sleep', ['60'], { stdio: ['ignore', 'ignore', 'ignore', fd] });
    fs.closeSync(fd);
    try {
      expect(() => DataDirLock.acquire(dataDir)).toThrow(DataDirInUseError);
      fs.writeFileSync(file, JSON.stringify({ pid: 999_999_999, start_time: 1, hostname: os.hostname(), started_at: new Date(0).toISOString() }));
      const unknown = catchInUse(dataDir);
      expect(unknown.holder).toBeNull();
      expect(unknown.message).toMatch(/is in use by another process;/);

      const note = { pid: holder.pid!, start_time: readProcess(holder.pid!)!.startTime, hostname: os.hostname(), started_at: new Date().toISOString() };
      fs.writeFileSync(file, JSON.stringify(note));
      expect(catchInUse(dataDir).holder).toEqual(note);
    } finally {
      holder.kill('SIGKILL');
      await new Promise((resolve) => holder.once('exit', resolve));
    }
    // The holder is gone: the lock is free at once, and the winner's note replaces the old one.
    const lock = DataDirLock.acquire(dataDir);
    expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toMatchObject({ pid: process.pid, hostname: os.hostname() });
    lock.release();
  });
});

function catchInUse(dataDir: string): DataDirInUseError {
  try {
    DataDirLock.acquire(dataDir).release();
  } catch (error) {
    if (error instanceof DataDirInUseError) return error;
    throw error;
  }
  throw new Error('the lock was free');
}
