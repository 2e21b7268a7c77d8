// The Node options the server runs with (scripts/perf/server-node-flags.mjs): the Docker image, the
// single executable, `npm start` and the benchmarks' servers use the same ones, and `npm start` and
// the benchmarks really hand them to the server's node.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CLI, startProcess, type StartedProcess } from '../../bench/support/processes.js';
import { SERVER_NODE_FLAGS } from '../../scripts/perf/server-node-flags.mjs';

const ROOT = path.resolve(import.meta.dirname, '../..');
const started: ChildProcess[] = [];
const servers: StartedProcess[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) await server.stop();
  for (const child of started.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  }
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-node-flags-'));
  dirs.push(dir);
  return dir;
}

/** A process's arguments from /proc, or null once it is gone. */
function argumentsOf(pid: number | string): string[] | null {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(0, -1);
  } catch {
    return null;
  }
}

/** The arguments of the server `npm start` (scripts/start.mjs) spawns, read from /proc once it runs. */
async function npmStartServerArguments(): Promise<string[]> {
  const dir = tempDir();
  const start = spawn(process.execPath, [path.join(ROOT, 'scripts', 'start.mjs'), '--port', '0', '--data-dir', path.join(dir, 'data')], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, AGENTD_MASTER_KEY: 'k-node-flags-test-key-0123456789', AGENTD_LOG_LEVEL: 'warn' },
    stdio: 'ignore',
  });
  started.push(start);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const children = fs.readFileSync(`/proc/${start.pid}/task/${start.pid}/children`, 'utf8').trim().split(' ').filter(Boolean);
    // The server, not a build step prepare() may run first.
    const server = children.map((pid) => argumentsOf(pid)).find((args) => args?.some((arg) => arg.endsWith('dist/cli.js')));
    if (server) return server;
    if (Date.now() > deadline) throw new Error('npm start started no server');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** The Node options as given before the script: [node, ...options, script, ...]. */
function nodeOptions(args: string[]): string[] {
  return args.slice(1, args.findIndex((arg) => arg.endsWith('dist/cli.js')));
}

describe('the server\'s Node options', () => {
  it('are options this Node honours: the young generation is capped', () => {
    // V8's heap limit counts the young generation's largest size: the cap lowers it.
    const limit = (options: readonly string[]) => Number(spawnSync(process.execPath, [...options, '-p', 'require("node:v8").getHeapStatistics().heap_size_limit'], { encoding: 'utf8' }).stdout);
    expect(SERVER_NODE_FLAGS).toContain('--max-semi-space-size=8');
    expect(limit(SERVER_NODE_FLAGS)).toBeGreaterThan(0);
    expect(limit(SERVER_NODE_FLAGS)).toBeLessThan(limit([]));
  });

  it('are in the Docker image\'s command and the single executable\'s SEA config', () => {
    expect(fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8')).toContain(`CMD ${JSON.stringify(['node', ...SERVER_NODE_FLAGS, 'dist/cli.js']).replaceAll(',', ', ')}`);
    expect(fs.readFileSync(path.join(ROOT, 'scripts', 'build-binary.mjs'), 'utf8')).toContain('execArgv: SERVER_NODE_FLAGS');
  });

  it('are what npm start runs the server with', async () => {
    expect(nodeOptions(await npmStartServerArguments())).toEqual(SERVER_NODE_FLAGS);
  });

  it('are what the benchmarks start `node dist/cli.js` with', async () => {
    const dir = tempDir();
    const server = await startProcess({ command: [process.execPath, CLI], args: (port) => ['--port', String(port), '--data-dir', path.join(dir, 'data')], env: { AGENTD_LOG_LEVEL: 'warn' }, probe: '/alive' });
    servers.push(server);
    expect(nodeOptions(argumentsOf(server.child.pid!)!)).toEqual(SERVER_NODE_FLAGS);
  });
});
