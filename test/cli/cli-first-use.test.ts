import fs from 'node:fs';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnServer, tempDir, TEST_KEY, type SpawnedServer } from '../support/agentd.js';
import { runCli } from '../support/cli.js';

/**
 * A new user's first steps (issue 79, the CLI): no LLM configured, a key without a URL, a port in
 * use. Each ends with a sentence naming what to set, and leaves nothing behind.
 */
let base: string;

beforeAll(() => {
  base = tempDir('agentd-cli-first-use-');
});

afterAll(() => {
  if (base) fs.rmSync(base, { recursive: true, force: true });
});

/** Whether something accepts connections on 127.0.0.1:port. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

describe('a port in use', () => {
  it('says --port/AGENTD_PORT and writes nothing into a new data dir', { timeout: 60_000 }, async () => {
    const holder = net.createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as AddressInfo).port;
    const dataDir = path.join(base, 'new-data-dir');
    try {
      const result = await runCli(['--port', String(port), '--data-dir', dataDir], { env: { HOME: base, AGENTD_LLM_MODEL: 'm' } });
      expect(result.code).toBe(1);
      expect(result.stderr).toContain(`agentd: cannot listen on 127.0.0.1:${port}: the port is in use (EADDRINUSE). Choose another with --port P (or AGENTD_PORT), or stop what holds it`);
      expect(fs.existsSync(dataDir)).toBe(false);
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });
});

describe('no LLM configured', () => {
  it('agentd run names the variables to set, exits 2, and creates no conversation', { timeout: 60_000 }, async () => {
    const home = path.join(base, 'home-no-llm');
    const project = path.join(base, 'project');
    fs.mkdirSync(path.join(home), { recursive: true });
    fs.mkdirSync(project, { recursive: true });
    const result = await runCli(['run', 'hello'], { cwd: project, env: { HOME: home } });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('agentd: no LLM is configured: set AGENTD_LLM_MODEL and its key (OPENAI_API_KEY; AGENTD_LLM_API_KEY and AGENTD_LLM_BASE_URL for another provider) in your environment or in ~/.agentd/.env. Nothing was created.');
    expect(result.stderr).not.toContain('PUT /config');
    const listed = await runCli(['conversations', '--json'], { env: { HOME: home } });
    expect(listed.code).toBe(0);
    expect(listed.stdout).toBe('');
  });

  describe('against a server without a default LLM', () => {
    let server: SpawnedServer;
    beforeAll(async () => {
      server = await spawnServer({ dataDir: path.join(base, 'server-no-llm'), env: { HOME: base } });
    });
    afterAll(async () => {
      server?.child.kill('SIGTERM');
      await server?.exited;
    });

    it('the server warns once at start; agentd run says what the operator sets and leaves no conversation', { timeout: 60_000 }, async () => {
      const start = Date.now();
      while (!server.output().includes('no default LLM') && Date.now() - start < 10_000) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(server.output().match(/WARNING: no default LLM \(AGENTD_LLM_MODEL is not set\)/g)).toHaveLength(1);
      const result = await runCli(['run', 'hello'], { env: { HOME: base, AGENTD_URL: server.url, AGENTD_KEY: TEST_KEY } });
      expect(result.code).toBe(2);
      expect(result.stderr).toContain(`agentd: the server at ${server.url} has no default LLM: its operator sets AGENTD_LLM_MODEL`);
      const listed = await fetch(`${server.url}/conversations`, { headers: { authorization: `Bearer ${TEST_KEY}` } });
      expect(((await listed.json()) as { items: unknown[] }).items).toEqual([]);
    });
  });
});

describe('AGENTD_KEY without AGENTD_URL', () => {
  it('uses http://127.0.0.1:8000 when agentd answers there, and suggests it when nothing does', { timeout: 90_000 }, async (context) => {
    if (await listening(8000)) return context.skip('127.0.0.1:8000 is taken by something else here');
    const server = await spawnServer({ dataDir: path.join(base, 'server-8000'), port: 8000, env: { HOME: base, AGENTD_LLM_MODEL: 'm' } });
    try {
      const created = await fetch(`${server.url}/conversations`, { method: 'POST', headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ title: 'on the default port' }) });
      expect(created.status).toBe(201);
      const listed = await runCli(['conversations'], { env: { HOME: base, AGENTD_KEY: TEST_KEY } });
      expect(listed.stderr).toBe('');
      expect(listed.code).toBe(0);
      expect(listed.stdout).toContain('on the default port');
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
    const refused = await runCli(['conversations'], { env: { HOME: base, AGENTD_KEY: TEST_KEY } });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('no agentd answers at http://127.0.0.1:8000');
    expect(refused.stderr).toContain('AGENTD_URL=http://host:port');
  });
});
