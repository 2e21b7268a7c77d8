import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { listProcesses, readProcess } from '../../src/adapters/process/process-tree.js';
import { ShellLedger } from '../../src/adapters/shell/shell-ledger.js';
import { findInPath } from '../../src/adapters/sandbox/mounts.js';
import { tempDir, TEST_KEY } from '../support/agentd.js';
import { RESTART_TEST_TIMEOUT, restartableServer } from '../support/restartable-server.js';
import { processAlive, waitForProcess } from '../support/processes.js';

const auth = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };
const agentd = restartableServer();
const { api } = agentd;

describe('restart during a run', () => {
  it('comes back paused with the open tool call closed; the next run sends a valid history', { timeout: 90_000 }, async () => {
    const marker = `sleep 5${Math.floor(Math.random() * 9)}.${Date.now() % 1000}`;
    const llm = await agentd.fakeLlm([{ text: 'running it', toolCalls: [{ name: 'bash', arguments: { command: marker } }] }, { text: 'resumed fine' }]);
    const dataDir = tempDir();
    let server = await agentd.start({ dataDir });
    const created = await api('/conversations', {
      method: 'POST',
      body: JSON.stringify({ llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, initial_message: 'run the sleep' }),
    });
    const deadline = Date.now() + 15_000;
    while (!processAlive(marker) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(processAlive(marker)).toBe(true);
    const before = await api(`/conversations/${created.id}/events?limit=1000`);
    expect(before.items.at(-1).kind).toBe('action');

    server = await agentd.restart();

    const conversation = await api(`/conversations/${created.id}`);
    expect(conversation.status).toBe('paused');
    expect(conversation.current_run_id).toBeNull();
    const after = (await api(`/conversations/${created.id}/events?limit=1000`)).items;
    for (const [index, event] of before.items.entries()) expect(after[index]).toEqual(event);
    const tail = after.slice(before.items.length);
    expect(tail[0]).toMatchObject({ kind: 'observation', tool_name: 'bash', is_error: true, tool_call_id: before.items.at(-1).tool_call_id });
    expect(tail.find((event: any) => event.kind === 'state_update')).toMatchObject({ status: 'paused' });
    const runs = await api(`/conversations/${created.id}/runs`);
    expect(runs.items[0]).toMatchObject({ status: 'paused', outcome: 'server_restart' });
    // The orphaned shell of the dead server was cleaned up.
    expect(processAlive(marker)).toBe(false);

    const resumed = await fetch(`${server.url}/conversations/${created.id}/run`, { method: 'POST', headers: auth, body: '{}' });
    expect(resumed.status).toBe(202);
    const waitUntil = Date.now() + 15_000;
    while ((await api(`/conversations/${created.id}`)).status !== 'idle' && Date.now() < waitUntil) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(llm.violations).toEqual([]);
    const last = llm.requests.at(-1)!.body as any;
    const tool = last.messages.find((message: any) => message.role === 'tool');
    expect(tool.tool_call_id).toBe(before.items.at(-1).tool_call_id);
  });
});

describe('a later turn cut off by kill -9', () => {
  it('loses nothing acknowledged although the record on disk kept the status from before the run', { timeout: RESTART_TEST_TIMEOUT }, async () => {
    const marker = `sleep 6${Math.floor(Math.random() * 9)}.${Date.now() % 1000}`;
    const llm = await agentd.fakeLlm([{ text: 'first turn done' }, { toolCalls: [{ name: 'bash', arguments: { command: marker } }] }, { text: 'resumed fine' }]);
    const dataDir = tempDir();
    let server = await agentd.start({ dataDir });
    // No project settings: their rules are kept with the record at the first tool call, which would save it mid-run.
    const created = await api('/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, initial_message: 'first', setting_sources: [] }) });
    const waitForStatus = async (status: string) => {
      const until = Date.now() + 15_000;
      while ((await api(`/conversations/${created.id}`)).status !== status && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
      expect((await api(`/conversations/${created.id}`)).status).toBe(status);
    };
    await waitForStatus('idle');
    const sent = await fetch(`${server.url}/conversations/${created.id}/messages`, { method: 'POST', headers: auth, body: JSON.stringify({ content: 'second: run the sleep' }) });
    expect(sent.status).toBe(202);
    const { event: message, run_id: runId } = (await sent.json()) as { event: { seq: number }; run_id: string };
    const deadline = Date.now() + 15_000;
    while (!processAlive(marker) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(processAlive(marker)).toBe(true);
    // The case under test: the run's start did not rewrite the record (its run record and events say it runs).
    const onDisk = JSON.parse(fs.readFileSync(path.join(dataDir, 'conversations', created.id, 'conversation.json'), 'utf8'));
    expect(onDisk).toMatchObject({ status: 'idle', current_run_id: null });
    const before = (await api(`/conversations/${created.id}/events?limit=1000`)).items;
    expect(before.at(-1).kind).toBe('action');

    server = await agentd.restart();

    const conversation = await api(`/conversations/${created.id}`);
    expect(conversation).toMatchObject({ status: 'paused', current_run_id: null });
    const after = (await api(`/conversations/${created.id}/events?limit=1000`)).items;
    for (const [index, event] of before.entries()) expect(after[index]).toEqual(event);
    expect(after.find((event: any) => event.seq === message.seq)).toMatchObject({ kind: 'message', content: 'second: run the sleep' });
    const tail = after.slice(before.length);
    expect(tail[0]).toMatchObject({ kind: 'observation', is_error: true, tool_call_id: before.at(-1).tool_call_id, run_id: runId });
    expect(tail.find((event: any) => event.kind === 'state_update')).toMatchObject({ status: 'paused', run_id: runId });
    const runs = (await api(`/conversations/${created.id}/runs`)).items;
    expect(runs.map((run: any) => [run.status, run.outcome])).toEqual([['completed', 'idle'], ['paused', 'server_restart']]);
    expect(runs[1].id).toBe(runId);
    expect(processAlive(marker)).toBe(false);

    const resumed = await fetch(`${server.url}/conversations/${created.id}/run`, { method: 'POST', headers: auth, body: '{}' });
    expect(resumed.status).toBe(202);
    await waitForStatus('idle');
    expect(llm.violations).toEqual([]);
  });
});

describe('tool state across a restart', () => {
  it('the task list is restored from events', { timeout: RESTART_TEST_TIMEOUT }, async () => {
    const llm = await agentd.fakeLlm([
      { toolCalls: [{ name: 'task_tracker', arguments: { command: 'plan', tasks: [{ title: 'write code', status: 'in_progress' }, { title: 'test it', status: 'todo' }] } }] },
      { text: 'planned' },
      { toolCalls: [{ name: 'task_tracker', arguments: { command: 'view' } }] },
      { text: 'viewed' },
    ]);
    const dataDir = tempDir();
    let server = await agentd.start({ dataDir });
    const created = await api('/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, initial_message: 'plan' }) });
    const observations = async () => (await api(`/conversations/${created.id}/events?kind=observation`)).items;
    /** Until the conversation is idle with `count` observations: the run that makes them has ended. */
    const waitFor = async (count: number) => {
      const until = Date.now() + 15_000;
      while (Date.now() < until) {
        if ((await api(`/conversations/${created.id}`)).status === 'idle' && (await observations()).length === count) return;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      throw new Error(`no idle conversation with ${count} observations within 15 s`);
    };
    await waitFor(1);
    server = await agentd.restart();
    const sent = await fetch(`${server.url}/conversations/${created.id}/messages`, { method: 'POST', headers: auth, body: JSON.stringify({ content: 'show the plan' }) });
    expect(sent.status).toBe(202);
    await waitFor(2);
    // The second run's own observation: the `view` made after the restart shows the plan made before it.
    const [planned, viewed] = await observations();
    expect(viewed.tool_call_id).not.toBe(planned.tool_call_id);
    expect((await api(`/conversations/${created.id}/events?kind=action`)).items.at(-1)).toMatchObject({ tool_call_id: viewed.tool_call_id, arguments: { command: 'view' } });
    expect(viewed.content).toContain('write code');
    expect(viewed.content).toContain('test it');
  });
});

describe('confirmation across a restart', () => {
  it('pending actions survive a kill -9 and can be approved afterwards', { timeout: RESTART_TEST_TIMEOUT }, async () => {
    const llm = await agentd.fakeLlm([{ toolCalls: [{ name: 'file_editor', arguments: { command: 'create', path: 'approved.txt', file_text: 'yes' } }] }, { text: 'created it' }]);
    const dataDir = tempDir();
    let server = await agentd.start({ dataDir });
    const created = await api('/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, confirmation_mode: true, initial_message: 'make the file' }) });
    const until = Date.now() + 15_000;
    while ((await api(`/conversations/${created.id}`)).status !== 'waiting_for_confirmation' && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
    server = await agentd.restart();
    const after = await api(`/conversations/${created.id}`);
    expect(after.status).toBe('waiting_for_confirmation');
    expect(after.pending_actions).toHaveLength(1);
    expect(after.pending_actions[0]).toMatchObject({ tool_name: 'file_editor', arguments: { path: 'approved.txt' } });
    const approved = await fetch(`${server.url}/conversations/${created.id}/approve`, { method: 'POST', headers: auth, body: '{}' });
    expect(approved.status).toBe(202);
    const done = Date.now() + 15_000;
    while ((await api(`/conversations/${created.id}`)).status !== 'idle' && Date.now() < done) await new Promise((resolve) => setTimeout(resolve, 50));
    const download = await fetch(`${server.url}/conversations/${created.id}/files/approved.txt`, { headers: auth });
    expect(await download.text()).toBe('yes');
    expect(llm.violations).toEqual([]);
  });
});

const realBwrap = findInPath('bwrap', process.env.PATH ?? '/usr/bin:/bin');
if (!realBwrap) console.warn('test/agent/agent-restart.test.ts: the slow sandbox start test skipped (bwrap is not installed)');

/**
 * A sandbox held in its start, with the server's shell ledger naming it: a bwrap that, once,
 * holds for 30 s before it becomes the real one (the window in which a real bwrap has not yet
 * armed --die-with-parent, made wide). Returns what finds it again.
 */
async function startHeldSandbox(): Promise<{ marker: string; dataDir: string; env: Record<string, string>; spawned: number }> {
  const bin = tempDir();
  const hold = path.join(bin, 'hold-once');
  fs.writeFileSync(
    path.join(bin, 'bwrap'),
    `#!/bin/bash\nif rm "${hold}" 2>/dev/null; then for ((i = 0; i < 600; i++)); do sleep 0.05; done; fi\nexec ${realBwrap} "$@"\n`,
    { mode: 0o755 },
  );
  const searchPath = `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}`;
  // No warm shell: the next conversation's sandbox would start through the same bwrap 100 ms later,
  // and which of the two starts is held (and whether the killed server had recorded it) a race.
  const env = { PATH: searchPath, AGENTD_AGENT_PATH: searchPath, AGENTD_SANDBOX: 'bwrap', AGENTD_WARM_SHELLS: '0' };
  const marker = `${bin}/bwrap`;
  const llm = await agentd.fakeLlm([{ toolCalls: [{ name: 'bash', arguments: { command: 'echo started' } }] }, { text: 'done' }]);
  const dataDir = tempDir();
  await agentd.start({ dataDir, env });
  fs.writeFileSync(hold, '');
  await api('/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, initial_message: 'run it' }) });
  await waitForProcess(marker, 15_000);
  const held = Date.now() + 5_000;
  while (fs.existsSync(hold) && Date.now() < held) await new Promise((resolve) => setTimeout(resolve, 20));
  expect(fs.existsSync(hold)).toBe(false);
  // The server records the shell right after its spawn returns; on a loaded machine the wrapper
  // can already have run (and removed `hold`) while the server's thread waits for a CPU. The kill
  // is meant to land after that record, in the wrapper's 30 s: wait for the ledger to name a pid.
  const ledger = path.join(dataDir, 'shells.jsonl');
  const recorded = Date.now() + 15_000;
  while (!(fs.existsSync(ledger) && fs.readFileSync(ledger, 'utf8').includes('"pid":')) && Date.now() < recorded) await new Promise((resolve) => setTimeout(resolve, 20));
  const [entry] = ShellLedger.read(ledger);
  expect(entry).toBeDefined();
  return { marker, dataDir, env, spawned: entry!.pid };
}

function killMarked(marker: string): void {
  for (const entry of listProcesses()) {
    try {
      if (fs.readFileSync(`/proc/${entry.pid}/cmdline`, 'utf8').includes(marker)) process.kill(entry.pid, 'SIGKILL');
    } catch {
      // gone meanwhile
    }
  }
}

async function gone(marker: string, withinMs: number): Promise<boolean> {
  const until = Date.now() + withinMs;
  while (processAlive(marker) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
  return !processAlive(marker);
}

describe.skipIf(!realBwrap)('a sandbox still starting when the server is killed', () => {
  it('goes with the server, although bwrap had not yet bound itself to its parent: the spawner kills it', { timeout: 60_000 }, async () => {
    const { marker, spawned } = await startHeldSandbox();
    const spawner = readProcess(spawned)!.ppid;
    try {
      await agentd.kill();
      expect(await gone(marker, 5_000)).toBe(true);
      const until = Date.now() + 5_000;
      while (readProcess(spawner) && !readProcess(spawner)!.zombie && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(readProcess(spawner)?.zombie ?? true).toBe(true);
    } finally {
      killMarked(marker);
    }
  });

  it('is reaped by the next start when the spawner was killed with the server', { timeout: 60_000 }, async () => {
    const { marker, dataDir, env, spawned } = await startHeldSandbox();
    // Frozen first, so that neither sees the other go: both as if killed at the same instant.
    const spawner = readProcess(spawned)!.ppid;
    process.kill(spawner, 'SIGSTOP');
    try {
      await agentd.kill();
      process.kill(spawner, 'SIGKILL');
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(processAlive(marker)).toBe(true); // the killed server and spawner did not take it along
      await agentd.start({ dataDir, env });
      expect(await gone(marker, 5_000)).toBe(true);
    } finally {
      killMarked(marker);
    }
  });
});
