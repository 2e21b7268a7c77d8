import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from './support/agent-harness.js';
import { startServer, tempDir } from './support/agentd.js';
import { sleep, until } from './support/reliability.js';

/**
 * AGENTD_WARM_SHELL: the next conversation created with the defaults has its id, its workdir and
 * its shell made before it is asked for (core/agent/warm-shells.ts). A real server, its sandbox
 * and a scripted fake LLM.
 */
const harnesses: AgentHarness[] = [];
afterEach(async () => {
  for (const harness of harnesses.splice(0)) await harness.close();
});

/** Clock ticks since boot, as /proc/<pid>/stat counts a process's start (USER_HZ = 100 on Linux). */
const ticksNow = () => Number(fs.readFileSync('/proc/uptime', 'utf8').split(' ')[0]) * 100;

/** The bash call's output: the start of the shell's bash (ticks since boot), whether it has the secret, its directory. */
const PROBE = `cut -d' ' -f22 /proc/$$/stat; { [ "$TOKEN" = warm-secret-value ] && echo has-the-secret || echo no-secret; }; pwd`;

async function firstCommand(harness: AgentHarness, id: string): Promise<string[]> {
  harness.llm.setScript([{ toolCalls: [{ name: 'bash', arguments: { command: PROBE } }] }, { text: 'done' }]);
  expect((await harness.post(`/conversations/${id}/messages`, { content: 'probe' })).status).toBe(202);
  await harness.waitForStatus(id, ['idle', 'finished']);
  const result = (await harness.events(id)).find((event) => event.kind === 'observation' && event.tool_name === 'bash');
  return String(result.content).trim().split('\n');
}

describe('the warm shell', () => {
  it("is the next default conversation's: its id, workdir and already started shell, given the conversation's secrets", async () => {
    const harness = await startAgentHarness();
    harnesses.push(harness);
    const note = path.join(harness.server.dataDir, 'warm-workdir');
    const base = harness.server.services.conversations.workdirBase;
    // None before the first conversation; the first starts one for the next.
    expect(fs.existsSync(note)).toBe(false);
    const first = await harness.createConversation();
    await until(() => fs.existsSync(note), 'a warm workdir');
    const warmDir = fs.readFileSync(note, 'utf8');
    expect(path.dirname(warmDir)).toBe(fs.realpathSync(base));
    expect(path.basename(warmDir)).not.toBe(first);
    // A conversation in a workdir of the client's leaves it to the next default one.
    const own = fs.realpathSync(tempDir());
    const ownCreatedAt = ticksNow();
    const elsewhere = await harness.createConversation({ workdir: own });
    expect(elsewhere).not.toBe(path.basename(warmDir));
    expect(fs.readFileSync(note, 'utf8')).toBe(warmDir);
    // Give it time to start (a start takes ~40 ms here), then take it.
    await sleep(500);
    const createdAt = ticksNow();
    const second = await harness.createConversation({ secrets: { TOKEN: 'warm-secret-value' } });
    expect(second).toBe(path.basename(warmDir));
    expect((await harness.get(`/conversations/${second}`)).body.workdir).toBe(warmDir);
    const [started, secret, cwd] = await firstCommand(harness, second);
    // Its bash is older than the conversation: started ahead.
    expect(Number(started)).toBeLessThan(createdAt);
    expect([secret, cwd]).toEqual(['has-the-secret', warmDir]);
    // The conversation in its own workdir started its shell once created.
    const [ownStarted, ownSecret, ownCwd] = await firstCommand(harness, elsewhere);
    expect([ownSecret, ownCwd]).toEqual(['no-secret', own]);
    expect(Number(ownStarted)).toBeGreaterThanOrEqual(Math.floor(ownCreatedAt));
    // Taken: the next one is another.
    await until(() => fs.existsSync(note) && fs.readFileSync(note, 'utf8') !== warmDir, 'the next warm workdir');
    // Deleting the conversation with delete_workdir removes the workdir made for it, as for any default workdir.
    expect((await fetch(`${harness.server.url}/conversations/${second}?delete_workdir=true`, { method: 'DELETE', headers: harness.server.auth })).status).toBe(204);
    await until(() => !fs.existsSync(warmDir), 'its workdir to go');
    fs.rmSync(own, { recursive: true, force: true });
  }, 60_000);

  it('waiting unused past AGENTD_IDLE_TIMEOUT_S, is closed and its workdir removed; none while that is 0 or AGENTD_WARM_SHELL=false', async () => {
    const harness = await startAgentHarness([], { env: { AGENTD_IDLE_TIMEOUT_S: '1' } });
    harnesses.push(harness);
    const note = path.join(harness.server.dataDir, 'warm-workdir');
    await harness.createConversation();
    await until(() => fs.existsSync(note), 'a warm workdir');
    const warmDir = fs.readFileSync(note, 'utf8');
    await until(() => !fs.existsSync(note) && !fs.existsSync(warmDir), 'the unused warm shell to go with its workdir', 10_000);
    for (const env of [{ AGENTD_IDLE_TIMEOUT_S: '0' }, { AGENTD_WARM_SHELL: 'false' }] as Record<string, string>[]) {
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

  it("a warm workdir left by a crash is removed at the next start (when empty and no conversation's)", async () => {
    const dataDir = tempDir();
    const base = path.join(dataDir, 'workspaces');
    const empty = path.join(base, '0f6f3c52-5b8a-4f5e-9d55-5a1b6f0e6a11');
    fs.mkdirSync(empty, { recursive: true });
    fs.writeFileSync(path.join(dataDir, 'warm-workdir'), fs.realpathSync(empty));
    const server = await startServer({ dataDir, listen: false });
    try {
      expect(fs.existsSync(empty)).toBe(false);
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
