/**
 * The server's warm-up (src/cli/warm-up.ts): a server started with a default LLM starts the next
 * conversations' shells before any conversation exists, and the first conversation created takes
 * one; a server without one starts nothing until asked.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { descendants } from '../../bench/support/process-census.js';
import { startFakeLlm } from '../fake-llm/fake-llm-server.js';
import { spawnServer, TEST_KEY, type SpawnedServer } from '../support/agentd.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-warm-up-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** The names (comm) of the processes below the server. */
function below(server: SpawnedServer): string[] {
  return descendants(server.child.pid!).map((pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
    } catch {
      return '';
    }
  });
}

async function until(done: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!done() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  return done();
}

async function stop(server: SpawnedServer): Promise<void> {
  server.child.kill('SIGTERM');
  expect(await server.exited).toBe(0);
}

describe('the server warms up as it starts', () => {
  it('with a default LLM: the next conversations\' shells start before any conversation, and the first one created takes one', { timeout: 120_000 }, async () => {
    const llm = await startFakeLlm([]);
    const dataDir = path.join(tmp, 'with-llm');
    const server = await spawnServer({ dataDir, env: { AGENTD_LLM_MODEL: 'fake', AGENTD_LLM_BASE_URL: llm.url, AGENTD_LLM_API_KEY: 'k' } });
    try {
      expect(await until(() => below(server).includes('bash'), 30_000), below(server).join(' ')).toBe(true);
      // The warm shells' workdirs are made (and noted) ahead: the first conversation is created in one of them.
      const noted = () => fs.readFileSync(path.join(dataDir, 'warm-workdir'), 'utf8').split('\n').filter(Boolean);
      expect(await until(() => fs.existsSync(path.join(dataDir, 'warm-workdir')) && noted().length > 0, 30_000)).toBe(true);
      const ahead = noted();
      const created = await fetch(`${server.url}/conversations`, { method: 'POST', headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' }, body: '{}' });
      expect(created.status).toBe(201);
      const { workdir } = (await created.json()) as { workdir: string };
      expect(ahead.map((dir) => fs.realpathSync(dir))).toContain(fs.realpathSync(workdir));
    } finally {
      await stop(server);
      await llm.close();
    }
  });

  it('without a default LLM: nothing is started until a conversation asks', { timeout: 60_000 }, async () => {
    const server = await spawnServer({ dataDir: path.join(tmp, 'without-llm') });
    try {
      // Well past the warm-up's moment (WARM_UP_AFTER_MS) and a sandbox's start.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(below(server)).toEqual([]);
    } finally {
      await stop(server);
    }
  });
});
