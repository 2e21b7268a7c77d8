import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm, type RecordedRequest } from '../fake-llm/fake-llm-server.js';
import { spawnServer, TEST_KEY, type SpawnedServer } from '../support/agentd.js';
import { processAlive } from '../support/processes.js';

let server: SpawnedServer | undefined;
let fake: FakeLlm | undefined;
let dataDir: string | undefined;
afterEach(async () => {
  if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
  await server?.exited;
  await fake?.close();
  if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  server = fake = dataDir = undefined;
});

const IDLE_CONVERSATIONS = 8;

/** The first request of each conversation runs `true`; a message containing "stubborn" runs a loop bash itself keeps going through C-c. */
function script(recorded: RecordedRequest) {
  const messages = recorded.body.messages ?? [];
  const last = messages.at(-1);
  if (last?.role === 'tool') return { text: 'done' };
  const stubborn = JSON.stringify(last?.content ?? '').includes('stubborn');
  const command = stubborn ? "trap '' INT; touch stubborn-started; while :; do sleep 0.2; done" : 'true';
  return { toolCalls: [{ name: 'bash', arguments: { command, timeout_s: 600 } }] };
}

describe('shutdown', () => {
  it('the force-exit timer (AGENTD_SHUTDOWN_TIMEOUT_S) ends a shutdown that cannot finish sooner, with idle sandboxes around, and nothing of theirs is left', async () => {
    fake = await startFakeLlm({ whenExhausted: script });
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-shutdown-'));
    // A stopped run takes at least 2 s to settle when its command ignores C-c (two interrupt grace periods): 0.5 s is sooner.
    server = await spawnServer({ dataDir, env: { AGENTD_SHUTDOWN_TIMEOUT_S: '0.5', AGENTD_IDLE_TIMEOUT_S: '0' } });
    const headers = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };
    const create = async (message: string) => {
      const response = await fetch(`${server!.url}/conversations`, { method: 'POST', headers, body: JSON.stringify({ llm: { model: 'fake-model', base_url: fake!.url, api_key: 'k' }, initial_message: message }) });
      expect(response.status).toBe(201);
      return ((await response.json()) as { id: string }).id;
    };
    const statusOf = async (id: string) => ((await (await fetch(`${server!.url}/conversations/${id}`, { headers })).json()) as { status: string }).status;
    const idle = await Promise.all(Array.from({ length: IDLE_CONVERSATIONS }, () => create('run true')));
    for (const id of idle) {
      const deadline = Date.now() + 60_000;
      while ((await statusOf(id)) !== 'idle') {
        if (Date.now() > deadline) throw new Error(`conversation ${id} did not finish its run`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    const stubborn = await create('stubborn');
    const workdir = ((await (await fetch(`${server.url}/conversations/${stubborn}`, { headers })).json()) as { workdir: string }).workdir;
    const until = Date.now() + 30_000;
    while (!fs.existsSync(path.join(workdir, 'stubborn-started'))) {
      if (Date.now() > until) throw new Error('the stubborn command did not start');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }

    server.child.kill('SIGTERM');
    const code = await server.exited;
    expect(code).toBe(1);
    expect(server.output()).toContain('shutdown took longer than 0.5 s (AGENTD_SHUTDOWN_TIMEOUT_S), exiting');
    expect(server.output()).not.toContain('"msg":"stopped"');
    // The sandboxes die with the server (bwrap --die-with-parent): bwrap's arguments name the workdirs under the data dir.
    const deadline = Date.now() + 10_000;
    while (processAlive(dataDir) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(processAlive(dataDir)).toBe(false);
  }, 120_000);
});
