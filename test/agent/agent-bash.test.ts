import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { processAlive } from '../support/processes.js';
import { ShellLedger } from '../../src/adapters/shell/shell-ledger.js';
import { requestJson } from '../support/json-api.js';

let harness: AgentHarness;
afterEach(async () => harness?.close());

const bash = (command: string, extra: Record<string, unknown> = {}) => ({ toolCalls: [{ name: 'bash', arguments: { command, ...extra } }] });

function observations(events: any[]): any[] {
  return events.filter((event) => event.kind === 'observation');
}

describe('agent with a real bash', () => {
  it('keeps cwd, env and functions across calls; two calls in one turn; background returns at once', async () => {
    harness = await startAgentHarness([
      { toolCalls: [{ name: 'bash', arguments: { command: 'mkdir -p sub && cd sub && export GREETING=hi && f() { echo "fn:$1"; }' } }, { name: 'bash', arguments: { command: 'pwd' } }] },
      bash('echo "$GREETING" && f ok && pwd'),
      bash('sleep 30 &'),
      { text: 'done' },
    ]);
    const id = await harness.createConversation({ initial_message: 'go' });
    await harness.waitForStatus(id, ['idle', 'error']);
    const results = observations(await harness.events(id));
    expect(results).toHaveLength(4);
    expect(results[1].content).toMatch(/\/sub\b/);
    expect(results[1].data.cwd).toMatch(/\/sub$/);
    expect(results[2].content).toContain('hi');
    expect(results[2].content).toContain('fn:ok');
    expect(results[2].data.exit_code).toBe(0);
    expect(typeof results[3].data.pid).toBe('number');
    expect(harness.llm.violations).toEqual([]);
  });

  it('soft timeout returns early, then C-c interrupts and the shell is usable', async () => {
    harness = await startAgentHarness([
      bash('echo started; sleep 40; echo never', { timeout_s: 1 }),
      bash('C-c', { is_input: true }),
      bash('echo after'),
      { text: 'ok' },
    ]);
    const id = await harness.createConversation({ initial_message: 'go' });
    await harness.waitForStatus(id, ['idle', 'error'], 20_000);
    const results = observations(await harness.events(id));
    expect(results[0].data.timed_out).toBe(true);
    expect(results[0].content).toContain('started');
    expect(results[2].content).toContain('after');
    expect(results[2].data.exit_code).toBe(0);
  });

  it('pause during `sleep 60` returns within seconds and the process is gone', async () => {
    const marker = `sleep 6${Math.floor(Math.random() * 9)}.${Date.now() % 1000}`;
    harness = await startAgentHarness([bash(marker)]);
    const id = await harness.createConversation({ initial_message: 'go' });
    const deadline = Date.now() + 10_000;
    while (!processAlive(marker) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(processAlive(marker)).toBe(true);
    const started = Date.now();
    const paused = await harness.post(`/conversations/${id}/pause`);
    expect(paused.body.status).toBe('paused');
    expect(Date.now() - started).toBeLessThan(4000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(processAlive(marker)).toBe(false);
    const events = await harness.events(id);
    const result = observations(events).at(-1);
    expect(result.tool_name).toBe('bash');
    // Every action has its observation.
    expect(events.filter((event) => event.kind === 'action').length).toBe(observations(events).length);
  });

  it('the shell has the secrets (and one added mid-conversation) but never shows them', async () => {
    const value = `v-${Math.random().toString(36).slice(2)}-secret`;
    harness = await startAgentHarness([bash('echo ${#MY_SECRET} "$MY_SECRET"'), { text: 'one' }, bash('echo "$LATER"'), { text: 'two' }]);
    const id = await harness.createConversation({ secrets: { MY_SECRET: value }, initial_message: 'go' });
    await harness.waitForStatus(id, ['idle']);
    await fetch(`${harness.server.url}/conversations/${id}/secrets`, {
      method: 'PUT',
      headers: { ...harness.server.auth, 'content-type': 'application/json' },
      body: JSON.stringify({ secrets: { LATER: 'later-value-xyz' } }),
    });
    await harness.post(`/conversations/${id}/messages`, { content: 'again' });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await harness.waitForStatus(id, ['idle']);
    const results = observations(await harness.events(id));
    expect(results[0].content).toContain(`${value.length} <secret:MY_SECRET>`);
    expect(results[1].content).toContain('<secret:LATER>');
    expect(JSON.stringify(harness.llm.requests.map((request) => request.body))).not.toContain(value);
    expect(JSON.stringify(harness.llm.requests.map((request) => request.body))).not.toContain('later-value-xyz');
  });

  it('deleting a conversation leaves no shell process behind', async () => {
    const marker = `sleep 7${Math.floor(Math.random() * 9)}.${Date.now() % 1000}`;
    harness = await startAgentHarness([bash(`${marker} &`), { text: 'ok' }]);
    const id = await harness.createConversation({ initial_message: 'go' });
    await harness.waitForStatus(id, ['idle']);
    expect(processAlive(marker)).toBe(true);
    const deleted = await fetch(`${harness.server.url}/conversations/${id}`, { method: 'DELETE', headers: harness.server.auth });
    expect(deleted.status).toBe(204);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(processAlive(marker)).toBe(false);
  });
});

describe('changing the workdir', () => {
  it('is refused during a run, and afterwards the shell starts in the new workdir', async () => {
    harness = await startAgentHarness([{ hang: true }, bash('pwd'), { text: 'ok' }]);
    const id = await harness.createConversation({ initial_message: 'go' });
    // Paused while the LLM hangs on the first request (a pause before it leaves would leave the hang to the next run).
    await expect.poll(() => harness.llm.requests.length, { timeout: 15_000 }).toBe(1);
    const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), 'agentd-new-workdir-'));
    const put = (body: unknown) => requestJson(harness.server, 'PUT', `/conversations/${id}/config`, body);
    expect((await put({ workdir: elsewhere })).status).toBe(409);
    await harness.post(`/conversations/${id}/pause`);
    const changed = await put({ workdir: elsewhere });
    expect(changed.status).toBe(200);
    await harness.post(`/conversations/${id}/run`);
    await harness.waitForStatus(id, ['idle']);
    const results = observations(await harness.events(id));
    expect(results.at(-1).content).toContain(fs.realpathSync(elsewhere));
  });
});

describe('the conversation shell', () => {
  it('starts while the LLM is still answering the first turn, so the first bash call finds it ready', async () => {
    harness = await startAgentHarness([{ hang: true }]);
    const id = await harness.createConversation({ initial_message: 'go' });
    await harness.waitForStatus(id, ['running']);
    // The LLM hangs on its first answer: no tool was called, yet the shell is up (in the ledger, alive).
    const ledger = path.join(harness.server.dataDir, 'shells.jsonl');
    const deadline = Date.now() + 15_000;
    let pids: number[] = [];
    while (pids.length === 0) {
      if (Date.now() > deadline) throw new Error('no shell was started while the LLM answered');
      try {
        pids = ShellLedger.read(ledger).map((entry) => entry.pid);
      } catch {
        // not written yet
      }
      if (pids.length === 0) await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(fs.existsSync(`/proc/${pids[0]}`)).toBe(true);
    // The first request may leave after the shell started (the run's checkpoint comes first); it hangs.
    while (harness.llm.requests.length === 0) {
      if (Date.now() > deadline) throw new Error('the LLM was never asked');
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    expect(fs.existsSync(`/proc/${pids[0]}`)).toBe(true);
    expect((await harness.events(id)).filter((event) => event.kind === 'action')).toEqual([]);
    expect(harness.llm.requests).toHaveLength(1);
  });
});

