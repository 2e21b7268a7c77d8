import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { spawnServer, startServer, tempDir } from '../support/agentd.js';
import { commandLineOf, liveDescendants, runsIn } from '../support/processes.js';
import { sleep, until } from '../support/reliability.js';
import { requestJson } from '../support/json-api.js';

/**
 * AGENTD_WARM_SHELLS: the next conversations created with the defaults have their ids, their
 * workdirs and their shells made before they are asked for (core/agent/warm-shells.ts). A real
 * server, its sandbox and a scripted fake LLM.
 */
const harnesses: AgentHarness[] = [];
afterEach(async () => {
  for (const harness of harnesses.splice(0)) await harness.close();
});

/** The workdirs the note names, oldest first (the next one taken first). */
const noted = (note: string): string[] => (fs.existsSync(note) ? fs.readFileSync(note, 'utf8').split('\n').filter(Boolean) : []);

/** Clock ticks since boot, as /proc/<pid>/stat counts a process's start (USER_HZ = 100 on Linux). */
const ticksNow = () => Number(fs.readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * 100;

/** The bash call's output: the start of the shell's bash (ticks since boot), whether it has the secret, its directory. */
const PROBE = `cut -d' ' -f22 /proc/$$/stat; { [ "$TOKEN" = warm-secret-value ] && echo has-the-secret || echo no-secret; }; pwd`;

/**
 * Waits until the shell started ahead in `dir` runs: its interactive bash (`bash … -i`, this
 * process's descendant, there) exists, not only the sandbox's setup (bash -c, bwrap). Under load
 * its start can take longer than any fixed wait.
 */
async function shellRunsIn(dir: string): Promise<void> {
  const bashIn = () => liveDescendants(process.pid).some((pid) => runsIn(pid, dir) && /^(\S*\/)?bash( \S+)* -i( |$)/.test(commandLineOf(pid) ?? ''));
  await until(bashIn, `a bash in ${dir}`);
}

async function firstCommand(harness: AgentHarness, id: string): Promise<string[]> {
  harness.llm.setScript([{ toolCalls: [{ name: 'bash', arguments: { command: PROBE } }] }, { text: 'done' }]);
  expect((await harness.post(`/conversations/${id}/messages`, { content: 'probe' })).status).toBe(202);
  await harness.waitForStatus(id, ['idle', 'finished']);
  const result = (await harness.events(id)).find((event) => event.kind === 'observation' && event.tool_name === 'bash');
  return String(result.content).trim().split('\n');
}

describe('the warm shell', () => {
  it("is the next default conversation's: its id, workdir and already started shell, given the conversation's secrets", async () => {
    const harness = await startAgentHarness([], { env: { AGENTD_WARM_SHELLS: '1' } });
    harnesses.push(harness);
    const note = path.join(harness.server.dataDir, 'warm-workdir');
    const base = harness.server.services.conversations.workdirBase;
    // None before the first conversation; the first starts one for the next.
    expect(fs.existsSync(note)).toBe(false);
    const first = await harness.createConversation();
    await until(() => noted(note).length === 1 && fs.existsSync(noted(note)[0]!), 'a warm workdir');
    const [warmDir] = noted(note) as [string];
    expect(path.dirname(warmDir)).toBe(fs.realpathSync(base));
    expect(path.basename(warmDir)).not.toBe(first);
    // A conversation in a workdir of the client's leaves it to the next default one.
    const own = fs.realpathSync(tempDir());
    const ownCreatedAt = ticksNow();
    const elsewhere = await harness.createConversation({ workdir: own });
    expect(elsewhere).not.toBe(path.basename(warmDir));
    expect(noted(note)).toEqual([warmDir]);
    // Once it runs, take it.
    await shellRunsIn(warmDir);
    const createdAt = ticksNow();
    const second = await harness.createConversation({ secrets: { TOKEN: 'warm-secret-value' } });
    expect(second).toBe(path.basename(warmDir));
    expect((await harness.get(`/conversations/${second}`)).body.workdir).toBe(warmDir);
    const [started, secret, cwd] = await firstCommand(harness, second);
    // Its bash is older than the conversation: started ahead (in the tick it was seen running at the latest).
    expect(Number(started)).toBeLessThanOrEqual(createdAt);
    expect([secret, cwd]).toEqual(['has-the-secret', warmDir]);
    // The conversation in its own workdir started its shell once created.
    const [ownStarted, ownSecret, ownCwd] = await firstCommand(harness, elsewhere);
    expect([ownSecret, ownCwd]).toEqual(['no-secret', own]);
    expect(Number(ownStarted)).toBeGreaterThanOrEqual(Math.floor(ownCreatedAt));
    // Taken: the next one is another.
    await until(() => noted(note).length === 1 && noted(note)[0] !== warmDir, 'the next warm workdir');
    // Deleting the conversation with delete_workdir removes the workdir made for it, as for any default workdir.
    expect((await fetch(`${harness.server.url}/conversations/${second}?delete_workdir=true`, { method: 'DELETE', headers: harness.server.auth })).status).toBe(204);
    await until(() => !fs.existsSync(warmDir), 'its workdir to go');
    fs.rmSync(own, { recursive: true, force: true });
  }, 60_000);

  it('two, by default: conversations created one right after the other each find one', async () => {
    const harness = await startAgentHarness();
    harnesses.push(harness);
    const note = path.join(harness.server.dataDir, 'warm-workdir');
    await harness.createConversation();
    await until(() => noted(note).length === 2 && noted(note).every((dir) => fs.existsSync(dir)), 'two warm workdirs');
    const warmDirs = noted(note);
    // Once both run, take both at once.
    for (const dir of warmDirs) await shellRunsIn(dir);
    const createdAt = ticksNow();
    const [first, second] = await Promise.all([harness.createConversation(), harness.createConversation()]);
    expect([first, second].sort()).toEqual(warmDirs.map((dir) => path.basename(dir)).sort());
    for (const id of [first!, second!]) {
      const [started, , cwd] = await firstCommand(harness, id);
      expect(Number(started)).toBeLessThanOrEqual(createdAt);
      expect(cwd).toBe(warmDirs.find((dir) => path.basename(dir) === id));
    }
    // And two more are made for the next ones.
    await until(() => noted(note).length === 2 && noted(note).every((dir) => !warmDirs.includes(dir)), 'two new warm workdirs');
  }, 60_000);

  it('waiting unused past AGENTD_IDLE_TIMEOUT_S, are closed and their workdirs removed; none while that is 0 or AGENTD_WARM_SHELLS=0', async () => {
    const harness = await startAgentHarness([], { env: { AGENTD_IDLE_TIMEOUT_S: '1' } });
    harnesses.push(harness);
    const note = path.join(harness.server.dataDir, 'warm-workdir');
    await harness.createConversation();
    // Two by default, made one after the other.
    await until(() => noted(note).length === 2, 'two warm workdirs');
    const warmDirs = noted(note);
    await until(() => !fs.existsSync(note) && warmDirs.every((dir) => !fs.existsSync(dir)), 'the unused warm shells to go with their workdirs', 10_000);
    // None is made again until the next creation.
    await sleep(300);
    expect(fs.readdirSync(harness.server.services.conversations.workdirBase)).toHaveLength(1);
    for (const env of [{ AGENTD_IDLE_TIMEOUT_S: '0' }, { AGENTD_WARM_SHELLS: '0' }] as Record<string, string>[]) {
      const off = await startAgentHarness([], { env });
      harnesses.push(off);
      await off.createConversation();
      await off.createConversation();
      await sleep(400);
      expect(fs.existsSync(path.join(off.server.dataDir, 'warm-workdir'))).toBe(false);
      // Only the two conversations' workdirs.
      expect(fs.readdirSync(off.server.services.conversations.workdirBase)).toHaveLength(2);
    }
  }, 60_000);

  it('a note that cannot be written leaves the server running: the unused shells still go, and conversations are still created', async () => {
    const dataDir = tempDir();
    const server = await spawnServer({ dataDir, env: { AGENTD_IDLE_TIMEOUT_S: '1' } });
    const api = (route: string, body?: unknown) => requestJson(server, body === undefined ? 'GET' : 'POST', route, body);
    const create = async () => (await api('/conversations', { llm: { model: 'fake-model', base_url: 'http://127.0.0.1:9/v1', api_key: 'sk-test' } })).body.id as string;
    try {
      const note = path.join(dataDir, 'warm-workdir');
      const base = path.join(dataDir, 'workspaces');
      const first = await create();
      await until(() => noted(note).length === 2, 'two warm workdirs');
      // The note becomes a directory: neither rewriting nor removing it can work now.
      fs.rmSync(note);
      fs.mkdirSync(note);
      await until(() => fs.readdirSync(base).length === 1, 'the unused warm shells to go with their workdirs', 15_000);
      expect(fs.readdirSync(base)).toEqual([first]);
      const second = await create();
      expect((await api('/health')).status).toBe(200);
      expect((await api(`/conversations/${second}`)).status).toBe(200);
      expect(server.child.exitCode).toBe(null);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);

  it("a warm workdir left by a crash is removed at the next start (when empty and no conversation's)", async () => {
    const dataDir = tempDir();
    const base = path.join(dataDir, 'workspaces');
    const empty = path.join(base, '0f6f3c52-5b8a-4f5e-9d55-5a1b6f0e6a11');
    const another = path.join(base, '7a0c1e2d-3b4f-4a5e-8d6c-1b2a3c4d5e6f');
    for (const dir of [empty, another]) fs.mkdirSync(dir, { recursive: true });
    // Noted one per line; one noted before it was made (a crash between the note and the mkdir) is not there.
    fs.writeFileSync(path.join(dataDir, 'warm-workdir'), `${fs.realpathSync(empty)}\n${fs.realpathSync(another)}\n${path.join(fs.realpathSync(base), '1e2d3c4b-5a6f-4e7d-9c8b-7a6f5e4d3c2b')}\n`);
    const server = await startServer({ dataDir, listen: false });
    try {
      expect(fs.existsSync(empty)).toBe(false);
      expect(fs.existsSync(another)).toBe(false);
      expect(fs.existsSync(path.join(dataDir, 'warm-workdir'))).toBe(false);
    } finally {
      await server.close();
    }
    // One holding files is kept.
    const full = path.join(base, '5d1c9a7e-2b4f-4c1d-8e3a-9f0b7c6d5e4f');
    fs.mkdirSync(full, { recursive: true });
    fs.writeFileSync(path.join(full, 'kept.txt'), 'kept');
    fs.writeFileSync(path.join(dataDir, 'warm-workdir'), fs.realpathSync(full));
    const again = await startServer({ dataDir, listen: false });
    let taken = '';
    try {
      expect(fs.readFileSync(path.join(full, 'kept.txt'), 'utf8')).toBe('kept');
      // One a conversation took (the note still names it), empty, is the conversation's: kept.
      const created = await again.app.inject({ method: 'POST', url: '/conversations', headers: again.auth, payload: {} });
      taken = created.json().workdir;
    } finally {
      await again.close();
    }
    fs.writeFileSync(path.join(dataDir, 'warm-workdir'), taken);
    const third = await startServer({ dataDir, listen: false });
    try {
      expect(fs.readdirSync(taken)).toEqual([]);
    } finally {
      await third.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
