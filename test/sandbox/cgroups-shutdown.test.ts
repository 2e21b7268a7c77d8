/**
 * Issue 71 #10: after SIGTERM about fifty empty sandbox cgroups were left behind. A server removes
 * the cgroups it made at shutdown, once the processes in them are gone. The test only reads the
 * cgroup file system: the directories are the server's, found through its sandboxes' /proc entries.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ShellLedger } from '../../src/adapters/shell/shell-ledger.js';
import { startFakeLlm, type FakeLlm, type RecordedRequest } from '../fake-llm/fake-llm-server.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { spawnServer, tempDir, TEST_KEY, type SpawnedServer } from '../support/agentd.js';
import { waitForProcess } from '../support/processes.js';

let server: SpawnedServer | undefined;
let harness: AgentHarness | undefined;
let fake: FakeLlm | undefined;
let dir: string | undefined;
afterEach(async () => {
  if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
  await server?.exited;
  await harness?.close();
  await fake?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  server = harness = fake = dir = undefined;
});

/** The sandbox cgroup directories (`.../agentd/<key>`) a process is in, from its /proc entry and this process's mount table. */
function sandboxCgroupsOf(pid: number): string[] {
  let membership: string;
  try {
    membership = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8');
  } catch {
    return [];
  }
  const mounts = fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .flatMap((line) => {
      const [left, right] = line.split(' - ');
      if (!left || !right) return [];
      const fields = left.split(' ');
      const [fsType = '', , options = ''] = right.split(' ');
      return [{ root: fields[3] ?? '', mountPoint: fields[4] ?? '', fsType, options: options.split(',') }];
    });
  const dirs: string[] = [];
  for (const line of membership.split('\n')) {
    const match = /^\d+:([^:]*):(.*\/agentd\/[^/]+)$/.exec(line);
    if (!match) continue;
    const [, controllers = '', cgroup = ''] = match;
    const mount = controllers === '' ? mounts.find((entry) => entry.fsType === 'cgroup2') : mounts.find((entry) => entry.fsType === 'cgroup' && controllers.split(',').some((name) => entry.options.includes(name)));
    if (mount) dirs.push(path.join(mount.mountPoint, path.posix.relative(mount.root, cgroup)));
  }
  return dirs;
}

async function waitUntil(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Each conversation's first request runs its message as a bash command; then it is done. */
function script(recorded: RecordedRequest) {
  const last = (recorded.body.messages ?? []).at(-1);
  if (last?.role === 'tool') return { text: 'done' };
  return { toolCalls: [{ name: 'bash', arguments: { command: String(last?.content ?? 'true'), timeout_s: 600 } }] };
}

describe('sandbox cgroups at shutdown', () => {
  it('SIGTERM: the cgroups the server made are removed, those of a command still running included', { timeout: 120_000 }, async (context) => {
    dir = tempDir('agentd-cgroups-shutdown-');
    const dataDir = path.join(dir, 'data');
    fake = await startFakeLlm({ whenExhausted: script });
    server = await spawnServer({ dataDir, env: { AGENTD_IDLE_TIMEOUT_S: '0' } });
    const headers = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };
    const api = async (route: string, init: RequestInit = {}) => (await fetch(`${server!.url}${route}`, { ...init, headers })).json() as Promise<any>;
    const limits = (await api('/info')).sandbox.limits;
    if (limits.memory_mb.enforced_by !== 'cgroup' && limits.processes.enforced_by !== 'cgroup') {
      context.skip('no cgroup limits the sandboxes on this machine (no delegated cgroup v2 or writable v1): nothing to remove');
    }
    const create = async (message: string): Promise<string> => (await api('/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake-model', base_url: fake!.url, api_key: 'k' }, initial_message: message }) })).id;
    const idle = await Promise.all(['true', 'sleep 300 >/dev/null 2>&1 &'].map(create));
    for (const id of idle) await waitUntil(`${id} to be idle`, async () => (await api(`/conversations/${id}`)).status === 'idle');
    const marker = `sleep 8${Math.floor(Math.random() * 9)}.${Date.now() % 1000}`;
    await create(marker);
    await waitForProcess(marker, 30_000);

    const shells = ShellLedger.read(path.join(dataDir, 'shells.jsonl')).map((entry) => entry.pid);
    expect(shells).toHaveLength(3);
    const cgroups = [...new Set(shells.flatMap(sandboxCgroupsOf))];
    // One per hierarchy for each of the three workdirs, there while their sandboxes run.
    expect(cgroups.length).toBeGreaterThanOrEqual(3);
    for (const cgroup of cgroups) expect(fs.existsSync(cgroup), cgroup).toBe(true);

    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
    await waitUntil('the cgroups to be removed', () => cgroups.every((cgroup) => !fs.existsSync(cgroup)), 15_000).catch(() => undefined);
    expect(cgroups.filter((cgroup) => fs.existsSync(cgroup))).toEqual([]);
  });

  it('close() of a server in this process removes them too', { timeout: 60_000 }, async (context) => {
    harness = await startAgentHarness([{ toolCalls: [{ name: 'bash', arguments: { command: 'sleep 300 >/dev/null 2>&1 & echo $$' } }] }, { text: 'done' }], { env: { AGENTD_IDLE_TIMEOUT_S: '0' } });
    const limits = (await harness.get('/info')).body.sandbox.limits;
    if (limits.memory_mb.enforced_by !== 'cgroup' && limits.processes.enforced_by !== 'cgroup') {
      context.skip('no cgroup limits the sandboxes on this machine (no delegated cgroup v2 or writable v1): nothing to remove');
    }
    const id = await harness.createConversation({ initial_message: 'start a background job' });
    await harness.waitForStatus(id, ['idle'], 45_000);
    const shells = ShellLedger.read(path.join(harness.server.dataDir, 'shells.jsonl')).map((entry) => entry.pid);
    const cgroups = [...new Set(shells.flatMap(sandboxCgroupsOf))];
    expect(cgroups.length).toBeGreaterThanOrEqual(1);
    for (const cgroup of cgroups) expect(fs.existsSync(cgroup), cgroup).toBe(true);
    await harness.close();
    harness = undefined;
    expect(cgroups.filter((cgroup) => fs.existsSync(cgroup))).toEqual([]);
  });
});
