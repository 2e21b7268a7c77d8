// The allocator's setting the server runs with (docs/operations.md, "Memory"): the Docker image,
// `npm start` and the benchmarks' servers use the same one, and `npm start` really hands it to the
// server (a caller's own GLIBC_TUNABLES wins).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SERVER_GLIBC_TUNABLES } from '../../bench/support/processes.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const started: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const child of started.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  }
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** A file of /proc, or '' once its process is gone. */
function readOr(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/** The environment of the server `npm start` (scripts/start.mjs) spawns, read from /proc once it runs. */
async function serverEnvironment(env: Record<string, string>): Promise<Map<string, string>> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-malloc-'));
  dirs.push(dir);
  const start = spawn(process.execPath, [path.join(ROOT, 'scripts', 'start.mjs'), '--port', '0', '--data-dir', path.join(dir, 'data')], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, AGENTD_MASTER_KEY: 'k-malloc-test-key-0123456789', AGENTD_LOG_LEVEL: 'warn', ...env },
    stdio: 'ignore',
  });
  started.push(start);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const children = fs.readFileSync(`/proc/${start.pid}/task/${start.pid}/children`, 'utf8').trim().split(' ').filter(Boolean);
    // The server, not a build step prepare() may run first.
    const server = children.find((pid) => readOr(`/proc/${pid}/cmdline`).includes('dist/cli.js'));
    if (server) {
      const environ = fs.readFileSync(`/proc/${server}/environ`, 'utf8');
      return new Map(environ.split('\0').filter(Boolean).map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]));
    }
    if (Date.now() > deadline) throw new Error('npm start started no server');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('GLIBC_TUNABLES', () => {
  it('is the same in the Dockerfile, scripts/start.mjs, the benchmarks and the documents', () => {
    expect(fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8')).toContain(`GLIBC_TUNABLES=${SERVER_GLIBC_TUNABLES}`);
    expect(fs.readFileSync(path.join(ROOT, 'scripts', 'start.mjs'), 'utf8')).toContain(`'${SERVER_GLIBC_TUNABLES}'`);
    for (const page of ['docs/operations.md', 'docs/deploy.md']) expect(fs.readFileSync(path.join(ROOT, page), 'utf8')).toContain(`GLIBC_TUNABLES=${SERVER_GLIBC_TUNABLES}`);
  });

  it('is what npm start runs the server with, unless the caller set one', async () => {
    expect((await serverEnvironment({})).get('GLIBC_TUNABLES')).toBe(SERVER_GLIBC_TUNABLES);
    expect((await serverEnvironment({ GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' })).get('GLIBC_TUNABLES')).toBe('glibc.malloc.arena_max=2');
  });
});
