/**
 * Issue 71: a workdir the user brings (a client's `workdir`, the CLI's current directory) is never
 * chowned, so a server running as root ran the agent there as the workdir's owner: uid 0 in one
 * root owns. Now the sandbox's launch mounts the workdir over itself, id-mapped, in a mount
 * namespace of its own (src/adapters/sandbox/workdir-idmap.ts): the agent runs as a uid of its own,
 * the owner's files are its files, what it makes is the owner's on disk, and the mount lives only
 * as long as the sandbox's processes (the host never holds one, not even after a kill -9). Where
 * the filesystem refuses (ramfs here), the agent runs as the owner, as before, and /health says so.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { sandboxUid } from '../../src/adapters/sandbox/identity.js';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { spawnServer, spawnedApi, tempDir, type SpawnedServer } from '../support/agentd.js';
import { idmapRefusal } from '../support/idmap.js';

const asRoot = process.geteuid?.() === 0;
const bwrapWorks = asRoot && spawnSync('bwrap', ['--ro-bind', '/', '/', '--unshare-pid', '--', '/bin/true']).status === 0;

const refusal = bwrapWorks ? await idmapRefusal() : null;
const skipped = !asRoot ? 'not root' : !bwrapWorks ? 'bubblewrap cannot run here' : refusal ? `this kernel refuses id-mapped mounts (${refusal})` : null;
if (skipped) console.warn(`test/sandbox/workdir-idmap.test.ts skipped: ${skipped}`);

const SANDBOX_ENV = { AGENTD_SANDBOX: 'bwrap', AGENTD_IDLE_TIMEOUT_S: '0' };
const bash = (command: string) => ({ toolCalls: [{ name: 'bash', arguments: { command } }] });

/** A root-owned repository with a root-owned file and a subdirectory, beside a root-owned file outside it. */
function broughtWorkdir(base: string, name: string): string {
  const workdir = path.join(base, name);
  fs.mkdirSync(path.join(workdir, 'src'), { recursive: true, mode: 0o755 });
  fs.writeFileSync(path.join(workdir, 'notes.txt'), 'first\n', { mode: 0o644 });
  fs.writeFileSync(path.join(workdir, 'src', 'main.txt'), 'main\n', { mode: 0o644 });
  fs.writeFileSync(path.join(base, `${name}-outside.txt`), 'untouched\n', { mode: 0o644 });
  return workdir;
}

/** Every entry under `dir` but those under `except`: path, owner, mode, size and content's time. */
function stateOf(dir: string, except: string): string[] {
  const lines: string[] = [];
  const walk = (at: string) => {
    for (const entry of fs.readdirSync(at, { withFileTypes: true })) {
      const full = path.join(at, entry.name);
      if (full === except || full.startsWith(`${except}/`)) continue;
      const stats = fs.lstatSync(full);
      lines.push(`${path.relative(dir, full)} ${stats.uid}:${stats.gid} ${stats.mode.toString(8)} ${stats.size} ${stats.mtimeMs}`);
      if (entry.isDirectory()) walk(full);
    }
  };
  walk(dir);
  return lines.sort();
}

/** uid:gid of an entry on disk (the host's view). */
const ownerOnDisk = (file: string) => `${fs.lstatSync(file).uid}:${fs.lstatSync(file).gid}`;

/** The processes whose mount table holds an id-mapped mount at `dir`, read from every /proc entry. */
function idmappedMountHolders(dir: string): number[] {
  const holders: number[] = [];
  for (const pid of fs.readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    let table: string;
    try {
      table = fs.readFileSync(`/proc/${pid}/mountinfo`, 'utf8');
    } catch {
      continue;
    }
    if (table.split('\n').some((line) => line.split(' ')[4] === dir && / - /.test(line) && line.split(' - ')[0]!.split(' ')[5]!.split(',').includes('idmapped'))) holders.push(Number(pid));
  }
  return holders;
}

async function waitUntil(what: string, check: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.skipIf(skipped !== null)('a root-owned workdir the user brings, as root', () => {
  let base: string;
  let harness: AgentHarness;
  let log = '';

  beforeAll(async () => {
    base = fs.realpathSync(tempDir('agentd-idmap-'));
    const logStream = new Writable({ write: (chunk, _encoding, done) => ((log += chunk), done()) });
    harness = await startAgentHarness([], { env: SANDBOX_ENV, logStream });
  });

  afterAll(async () => {
    await harness?.close();
    if (base) fs.rmSync(base, { recursive: true, force: true });
  });

  it("runs the agent as a uid of its own that edits root's files; what it makes is root's on disk; nothing outside changes", { timeout: 60_000 }, async () => {
    const workdir = broughtWorkdir(base, 'commands');
    const outside = stateOf(base, workdir);
    const created = await harness.post('/conversations', { workdir });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const command = [
      'id -u; id -g',
      'stat -c "notes %u:%g" notes.txt',
      'echo second >> notes.txt',
      'echo made > made.txt && mkdir -p deep/er && echo x > deep/er/f',
      'awk -v d="$PWD" \'$5 == d { print "mount " $6 }\' /proc/self/mountinfo',
    ].join('\n');
    const { status, body } = await harness.post(`/conversations/${created.body.id}/commands`, { command });
    expect(status).toBe(200);
    expect(body.exit_code, body.stderr).toBe(0);
    const uid = sandboxUid(workdir);
    const [shownUid, shownGid] = body.stdout.split('\n');
    expect([shownUid, shownGid]).toEqual([String(uid), String(uid)]);
    expect(body.stdout).toContain(`notes ${uid}:${uid}`);
    expect(body.stdout).toMatch(/^mount \S*idmapped/m);

    expect(fs.readFileSync(path.join(workdir, 'notes.txt'), 'utf8')).toBe('first\nsecond\n');
    for (const entry of ['notes.txt', 'made.txt', 'deep', 'deep/er', 'deep/er/f']) expect(ownerOnDisk(path.join(workdir, entry)), entry).toBe('0:0');
    expect(stateOf(base, workdir)).toEqual(outside);
    // The mount was the sandbox's alone: no process of the host holds one.
    expect(idmappedMountHolders(workdir)).toEqual([]);
  });

  it("the agent's shell and the checkpoints' git work through it; the mount goes with the sandbox when the conversation is deleted", { timeout: 90_000 }, async () => {
    const workdir = broughtWorkdir(base, 'agent');
    const outside = stateOf(base, workdir);
    harness.llm.setScript([bash('id -u; echo edited > notes.txt; echo new > added.txt'), bash('sleep 300 >/dev/null 2>&1 &'), { text: 'done' }]);
    const id = await harness.createConversation({ workdir, initial_message: 'edit the notes' });
    await harness.waitForStatus(id, ['idle', 'error'], 45_000);
    const observation = (await harness.events(id)).find((event) => event.kind === 'observation');
    expect(observation.content).toMatch(new RegExp(`^${sandboxUid(workdir)}$`, 'm'));
    expect(fs.readFileSync(path.join(workdir, 'notes.txt'), 'utf8')).toBe('edited\n');
    for (const entry of ['notes.txt', 'added.txt']) expect(ownerOnDisk(path.join(workdir, entry)), entry).toBe('0:0');

    const changes = (await harness.get(`/conversations/${id}/changes`)).body;
    expect(changes.items.map((change: any) => [change.path, change.status])).toEqual([
      ['added.txt', 'added'],
      ['notes.txt', 'modified'],
    ]);

    // While the shell's background job runs, its sandbox holds the mount, and only it.
    const holders = idmappedMountHolders(workdir);
    expect(holders.length).toBeGreaterThan(0);
    expect(holders).not.toContain(process.pid);
    expect((await fetch(`${harness.server.url}/conversations/${id}`, { method: 'DELETE', headers: harness.server.auth })).status).toBe(204);
    await waitUntil('the sandbox and its mount to be gone', () => idmappedMountHolders(workdir).length === 0);
    expect(fs.readFileSync(path.join(workdir, 'notes.txt'), 'utf8')).toBe('edited\n');
    expect(stateOf(base, workdir)).toEqual(outside);
  });

  it('where the filesystem refuses id-mapping (ramfs), the agent runs as the owner as before, and /health and the log say why', { timeout: 60_000 }, async () => {
    const workdir = path.join(base, 'ramfs');
    fs.mkdirSync(workdir);
    expect(spawnSync('mount', ['-t', 'ramfs', '-o', 'mode=0755', 'agentd-test', workdir]).status).toBe(0);
    try {
      fs.writeFileSync(path.join(workdir, 'notes.txt'), 'first\n');
      const created = await harness.post('/conversations', { workdir });
      const { body } = await harness.post(`/conversations/${created.body.id}/commands`, { command: 'id -u; echo second >> notes.txt' });
      expect(body.exit_code, body.stderr).toBe(0);
      expect(body.stdout.trim()).toBe('0');
      expect(fs.readFileSync(path.join(workdir, 'notes.txt'), 'utf8')).toBe('first\nsecond\n');
      const health = (await harness.get('/health')).body;
      expect(health.checks.sandbox.ok).toBe(true);
      expect(health.checks.sandbox.detail).toContain('could not be id-mapped');
      expect(health.checks.sandbox.detail).toContain('id-map the mount');
      expect(log).toContain('cannot be id-mapped');
      await fetch(`${harness.server.url}/conversations/${created.body.id}`, { method: 'DELETE', headers: harness.server.auth });
    } finally {
      spawnSync('umount', ['-l', workdir]);
    }
  });
});

describe.skipIf(skipped !== null)('a brought workdir across a kill -9', () => {
  let base: string;
  let server: SpawnedServer | undefined;
  let fake: FakeLlm | undefined;

  afterEach(async () => {
    if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
    await server?.exited;
    await fake?.close();
    if (base) fs.rmSync(base, { recursive: true, force: true });
  });

  it('leaves no mount behind, and the restarted server maps the workdir again', { timeout: 120_000 }, async () => {
    base = fs.realpathSync(tempDir('agentd-idmap-kill-'));
    const workdir = broughtWorkdir(base, 'repo');
    const dataDir = path.join(base, 'data');
    fake = await startFakeLlm({ script: [bash('sleep 300 >/dev/null 2>&1 &'), { text: 'done' }] });
    server = await spawnServer({ dataDir, env: SANDBOX_ENV });
    const api = spawnedApi(() => server!);
    const id = (await api('/conversations', { method: 'POST', body: JSON.stringify({ workdir, llm: { model: 'fake-model', base_url: fake.url, api_key: 'k' }, initial_message: 'start a job' }) })).id as string;
    const deadline = Date.now() + 45_000;
    while ((await api(`/conversations/${id}`)).status !== 'idle' && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(idmappedMountHolders(workdir).length).toBeGreaterThan(0);

    server.child.kill('SIGKILL');
    await server.exited;
    await waitUntil('the sandboxes and their mounts to be gone', () => idmappedMountHolders(workdir).length === 0);

    server = await spawnServer({ dataDir, env: SANDBOX_ENV });
    const after = await api(`/conversations/${id}/commands`, { method: 'POST', body: JSON.stringify({ command: 'id -u; echo after > after.txt' }) });
    expect(after.exit_code, after.stderr).toBe(0);
    expect(after.stdout.trim()).toBe(String(sandboxUid(workdir)));
    expect(ownerOnDisk(path.join(workdir, 'after.txt'))).toBe('0:0');
    server.child.kill('SIGTERM');
    await server.exited;
    expect(idmappedMountHolders(workdir)).toEqual([]);
  });
});
