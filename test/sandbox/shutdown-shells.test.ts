import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ShellLedger } from '../../src/adapters/shell/shell-ledger.js';
import { readProcess } from '../../src/adapters/process/process-tree.js';
import { startFakeLlm, type FakeLlm, type RecordedRequest } from '../fake-llm/fake-llm-server.js';
import { CLI, spawnServer, tempDir, TEST_KEY, type SpawnedServer } from '../support/agentd.js';
import { processAlive, waitForProcess } from '../support/processes.js';

let server: SpawnedServer | undefined;
let fake: FakeLlm | undefined;
let dir: string | undefined;
afterEach(async () => {
  if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
  await server?.exited;
  await fake?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  server = fake = dir = undefined;
});

/**
 * Preloaded into the server: at exit, the pids of its child processes that were never reaped
 * (alive, dying or zombies: a child leaves the parent's list only when reaped), from /proc.
 */
const UNREAPED_AT_EXIT = `
import fs from 'node:fs';
process.on('exit', () => {
  const children = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync('/proc/' + name + '/stat', 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === process.pid) children.push(Number(name));
    } catch {}
  }
  fs.writeFileSync(process.env.TEST_UNREAPED_FILE, JSON.stringify(children));
});
`;

/** Alive and not a zombie waiting to be reaped. */
function isRunning(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Each conversation's first request runs `true` (its shell then stays, idle); "busy" runs a long command (its marker is in the message). */
function script(recorded: RecordedRequest) {
  const last = (recorded.body.messages ?? []).at(-1);
  if (last?.role === 'tool') return { text: 'done' };
  const busy = /busy (sleep [\d.]+)/.exec(JSON.stringify(last?.content ?? ''));
  return { toolCalls: [{ name: 'bash', arguments: { command: busy ? busy[1] : 'true', timeout_s: 600 } }] };
}

describe.each(['default', 'none'])('shutdown with shells (sandbox: %s)', (sandbox) => {
  it('SIGTERM pauses the running run, then exits without reaping its shells (killed last, or dying with it); nothing of them is left for the next start to stop', async () => {
    dir = tempDir('agentd-shutdown-shells-');
    const dataDir = path.join(dir, 'data');
    const preload = path.join(dir, 'unreaped-at-exit.mjs');
    const unreapedFile = path.join(dir, 'unreaped.json');
    fs.writeFileSync(preload, UNREAPED_AT_EXIT);
    fake = await startFakeLlm({ whenExhausted: script });
    server = await spawnServer({
      dataDir,
      command: [process.execPath, '--import', preload, CLI],
      env: { AGENTD_IDLE_TIMEOUT_S: '0', TEST_UNREAPED_FILE: unreapedFile, ...(sandbox === 'none' && { AGENTD_SANDBOX: 'none' }) },
    });
    const headers = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };
    const api = async (route: string, init: RequestInit = {}) => (await fetch(`${server!.url}${route}`, { ...init, headers })).json() as Promise<any>;
    const create = async (message: string): Promise<string> => (await api('/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake-model', base_url: fake!.url, api_key: 'k' }, initial_message: message }) })).id;
    const waitFor = async (what: string, check: () => Promise<boolean>) => {
      const deadline = Date.now() + 60_000;
      while (!(await check())) {
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };
    const idle = await Promise.all(Array.from({ length: 4 }, () => create('run true')));
    for (const id of idle) await waitFor(`${id} to be idle`, async () => (await api(`/conversations/${id}`)).status === 'idle');
    const marker = `sleep 7${Math.floor(Math.random() * 9)}.${Date.now() % 1000}`;
    const busy = await create(`busy ${marker}`);
    await waitForProcess(marker, 30_000);
    const journal = path.join(dataDir, 'shells.jsonl');
    const shells = ShellLedger.read(journal).map((entry) => entry.pid);
    expect(shells).toHaveLength(5);

    // Each shell is the server's child, or its spawner's (a child of the server: see ProcessSpawner).
    const serverPid = server.child.pid!;
    const parents = new Map(shells.map((pid) => [pid, readProcess(pid)?.ppid]));
    for (const parent of new Set(parents.values())) expect(parent === serverPid || readProcess(parent!)?.ppid === serverPid).toBe(true);
    const ownChildren = shells.filter((pid) => parents.get(pid) === serverPid);
    // The busy one at least, started once the spawner was up.
    expect(ownChildren.length).toBeLessThan(shells.length);

    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    // Killed, not waited for: at exit each shell that was the server's own child was still its child, never reaped by it.
    const unreaped = JSON.parse(fs.readFileSync(unreapedFile, 'utf8')) as number[];
    expect(ownChildren.filter((pid) => !unreaped.includes(pid))).toEqual([]);
    // The kernel and init finish them: nothing of any shell is left (bwrap's arguments name the data dir).
    const left = () => [...shells.filter(isRunning), ...(processAlive(dataDir) ? [dataDir] : []), ...(processAlive(marker) ? [marker] : [])];
    const deadline = Date.now() + 10_000;
    while (left().length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(left()).toEqual([]);

    // The running run ended as paused by the shutdown, its tool call closed.
    // The journal still names them (the next start's safety net), and that start finds nothing of them to stop.
    expect(ShellLedger.read(journal).map((entry) => entry.pid).sort()).toEqual([...shells].sort());
    server = await spawnServer({ dataDir, env: { AGENTD_IDLE_TIMEOUT_S: '0', ...(sandbox === 'none' && { AGENTD_SANDBOX: 'none' }) } });
    expect(server.output()).not.toContain('stopped shells left running');
    expect((await api(`/conversations/${busy}`)).status).toBe('paused');
    const events = (await api(`/conversations/${busy}/events?limit=1000`)).items as { kind: string; tool_name?: string; content?: string }[];
    expect(events.find((event) => event.kind === 'observation' && event.tool_name === 'bash')?.content).toContain('Interrupted');
    for (const id of idle) expect((await api(`/conversations/${id}`)).status).toBe('idle');
  }, 120_000);
});
