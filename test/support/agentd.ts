import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { composeServices, type ServiceOverrides, type Services } from '../../src/compose.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { freePort } from './free-port.js';

export const TEST_KEY = 'test-master-key';

export { freePort };

export function tempDir(prefix = 'agentd-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export interface TestServer {
  app: FastifyInstance;
  services: Services;
  /** http://127.0.0.1:<port> when started with `listen: true`. */
  url: string;
  dataDir: string;
  auth: { authorization: string };
  close(): Promise<void>;
}

/** The real server, in-process, on a free loopback port (or only for inject() with listen: false). */
export async function startServer(options: { env?: Record<string, string>; dataDir?: string; listen?: boolean; logStream?: NodeJS.WritableStream; overrides?: ServiceOverrides } = {}): Promise<TestServer> {
  const dataDir = options.dataDir ?? tempDir();
  const config = loadConfig({
    AGENTD_DATA_DIR: dataDir,
    AGENTD_MASTER_KEY: TEST_KEY,
    AGENTD_LOG_LEVEL: options.logStream ? 'debug' : 'silent',
    // The tests' webhook receivers listen on 127.0.0.1; webhook-targets.test.ts tests the refusal.
    AGENTD_WEBHOOK_ALLOW_PRIVATE: 'true',
    ...sandboxFromTestEnv(),
    ...options.env,
  });
  const masker = { mask: (text: string) => text };
  const logger = createLogger({ level: config.logLevel, masker, ...(options.logStream ? { destination: options.logStream } : {}) });
  const services = await composeServices(config, logger, options.overrides);
  masker.mask = (text) => services.secrets.maskAny(text);
  const app = await buildApp(services);
  let url = '';
  if (options.listen !== false) url = await app.listen({ host: '127.0.0.1', port: 0 });
  else await app.ready();
  // As serve.ts does once it listens.
  await services.store.sortLoaded();
  return {
    app,
    services,
    url,
    dataDir,
    auth: { authorization: `Bearer ${TEST_KEY}` },
    async close() {
      await app.close();
      await services.close();
    },
  };
}

/** `AGENTD_SANDBOX=bwrap npx vitest run ...` runs the servers of the tests in that mode (default: auto). */
function sandboxFromTestEnv(): Record<string, string> {
  return process.env.AGENTD_SANDBOX ? { AGENTD_SANDBOX: process.env.AGENTD_SANDBOX } : {};
}

export interface SpawnedServer {
  child: ChildProcess;
  url: string;
  port: number;
  output: () => string;
  /** Resolves when the process has exited. */
  exited: Promise<number | null>;
}

export const CLI = path.resolve(import.meta.dirname, '../../dist/cli.js');

/**
 * `node dist/cli.js` as a child process (run `npm run build` first; `npm test` does), or another
 * `command` taking the same flags (the single executable), started in `cwd`.
 */
export async function spawnServer(options: { dataDir: string; env?: Record<string, string>; port?: number; args?: string[]; command?: readonly string[]; cwd?: string; healthyWithinMs?: number }): Promise<SpawnedServer> {
  const [program, ...leading] = options.command ?? [process.execPath, CLI];
  if (!options.command && !fs.existsSync(CLI)) throw new Error('dist/cli.js is missing: run `npm run build`');
  const port = options.port ?? (await freePort());
  const child = spawn(program!, [...leading, '--port', String(port), '--data-dir', options.dataDir, ...(options.args ?? [])], {
    ...(options.cwd ? { cwd: options.cwd } : {}),
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: os.homedir(), AGENTD_MASTER_KEY: TEST_KEY, AGENTD_LOG_LEVEL: 'warn', AGENTD_WEBHOOK_ALLOW_PRIVATE: 'true', ...sandboxFromTestEnv(), ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  // A healthy start takes about a second; on a loaded machine (2 cores shared by many) it has
  // taken more than 15 s. A server that cannot start exits early and says why, well before this.
  const deadline = Date.now() + (options.healthyWithinMs ?? 45_000);
  for (;;) {
    if (child.exitCode !== null) throw new Error(`agentd exited early (${child.exitCode}): ${output}`);
    try {
      const response = await fetch(`${url}/health`);
      if (response.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`agentd did not become healthy: ${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { child, url, port, output: () => output, exited };
}

/**
 * JSON requests with the test key to the spawned server `current()` returns now (tests that kill
 * and restart it keep one helper): the parsed body, or null when there is none.
 */
export function spawnedApi(current: () => SpawnedServer): (path: string, init?: RequestInit) => Promise<any> {
  return async (path, init = {}) => {
    const response = await fetch(`${current().url}${path}`, { ...init, headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' } });
    const text = await response.text();
    return text ? JSON.parse(text) : null;
  };
}

