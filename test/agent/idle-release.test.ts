import fs from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { findInPath } from '../../src/adapters/sandbox/mounts.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { openFilesWith } from '../support/open-files.js';
import { commandLineOf, processAlive, waitForProcess } from '../support/processes.js';

let harness: AgentHarness;
afterEach(async () => harness?.close());

const bash = (command: string) => ({ toolCalls: [{ name: 'bash', arguments: { command } }] });

/** Waits (bounded) until no process's command line contains `pattern`. */
async function until(condition: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`not so within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function waitForNoProcess(pattern: string, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (processAlive(pattern)) {
    if (Date.now() > until) throw new Error(`a process matching ${JSON.stringify(pattern)} is still there after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('AGENTD_IDLE_TIMEOUT_S', () => {
  it("releases an idle conversation's shell with every process; the next run restores its directory and exports and tells the LLM", async () => {
    const marker = `sleep 7${Math.floor(Math.random() * 90) + 10}.${Date.now() % 1000}`;
    harness = await startAgentHarness(
      [
        bash(`mkdir -p sub && cd sub && export KEPT_VALUE=kept-1; ${marker} &`),
        { text: 'first done' },
        bash('pwd; echo "value=$KEPT_VALUE"'),
        { text: 'second done' },
      ],
      { env: { AGENTD_IDLE_TIMEOUT_S: '1' } },
    );
    const id = await harness.createConversation({ initial_message: 'start' });
    await harness.waitForStatus(id, ['idle', 'error']);
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    // The run is over; its background job and the shell (with its sandbox, whose bwrap names the workdir) live until the timeout.
    await waitForProcess(marker);
    await waitForNoProcess(marker, 15_000);
    await waitForNoProcess(workdir, 5_000);
    // Nor does the server keep its event log open (the server runs in this process).
    await until(() => openFilesWith(`${harness.server.dataDir}/conversations/${id}/`).length === 0, 5_000);

    expect((await harness.post(`/conversations/${id}/messages`, { content: 'again' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle', 'error']);
    const observations = (await harness.events(id)).filter((event) => event.kind === 'observation');
    expect(observations).toHaveLength(2);
    const second = observations[1];
    expect(second.data.exit_code).toBe(0);
    expect(second.content).toMatch(/The shell was stopped after 1 s idle and restarted/);
    expect(second.content).toContain(`${workdir}/sub\n`);
    expect(second.content).toContain('value=kept-1');
    // The LLM saw it: the tool result of its last request carries the note.
    const last = harness.llm.requests.at(-1)!;
    const toolMessages = (last.body.messages ?? []).filter((message) => message.role === 'tool');
    expect(JSON.stringify(toolMessages.at(-1)?.content)).toContain('The shell was stopped after 1 s idle');
  });
});

/** The server's (this process's) children whose command line contains `pattern`: the outermost process of each shell. */
/** The processes the server spawned (its children, or its spawner's: see ProcessSpawner) whose command line contains `pattern`. */
function childrenMatching(pattern: string): number[] {
  const parentOf = (pid: number | string) => Number(fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[1]);
  const out: number[] = [];
  for (const pid of fs.readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const parent = parentOf(pid);
      if ((parent === process.pid || parentOf(parent) === process.pid) && commandLineOf(pid)?.includes(pattern)) out.push(Number(pid));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** Sends one message, waits for the run to end, and returns its bash call's observation, checked successful. */
async function runOnce(id: string): Promise<{ content: string }> {
  expect((await harness.post(`/conversations/${id}/messages`, { content: 'go' })).status).toBe(202);
  await harness.waitForStatus(id, ['idle', 'error']);
  const [observation] = (await harness.events(id)).filter((event) => event.kind === 'observation');
  expect(observation).toMatchObject({ is_error: false, data: { exit_code: 0 } });
  return observation;
}

// The sandbox's bwrap names the workdir on its command line: that is how this test sees the shell.
const bwrapSandbox = Boolean(findInPath('bwrap', process.env.PATH ?? '/usr/bin:/bin')) && (process.env.AGENTD_SANDBOX ?? 'auto') !== 'none';
if (!bwrapSandbox) console.warn('test/agent/idle-release.test.ts: the shell-at-creation test skipped (no bwrap sandbox here)');

describe.runIf(bwrapSandbox)('a shell started at creation', () => {
  it('is the one the first run uses, and goes after the idle timeout when no run comes', async () => {
    harness = await startAgentHarness([bash('echo from the warm shell'), { text: 'done' }], { env: { AGENTD_IDLE_TIMEOUT_S: '2' } });
    const id = await harness.createConversation();
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    // No message yet: the shell (its sandbox) starts anyway. Waited for as the one child that names
    // the workdir, and kept from that same look: while the start still execs (bash, setpriv, the
    // wrapper: one pid), a look can catch the process between two programs with no command line
    // (a second look, taken on a loaded CI machine, found none).
    let before: number[] = [];
    await until(() => (before = childrenMatching(workdir)).length === 1, 15_000);
    const observation = await runOnce(id);
    expect(observation.content).toContain('from the warm shell');
    expect(observation.content).not.toMatch(/restarted/);
    // The same sandbox ran the command: no second shell was started for the run.
    expect(childrenMatching(workdir)).toEqual(before);

    // Another conversation that never runs: its shell goes after the idle timeout.
    const unused = await harness.createConversation();
    const unusedWorkdir = (await harness.get(`/conversations/${unused}`)).body.workdir as string;
    await waitForProcess(unusedWorkdir, 15_000);
    await waitForNoProcess(unusedWorkdir, 15_000);
  });

  it('gives the agent the files put into the workdir on the host before the first run; a released one is not reported restarted', async () => {
    const asRoot = process.geteuid?.() === 0;
    harness = await startAgentHarness([bash('echo more >> host.txt && mkdir -p dir/new && echo ok > dir/new/f && cat host.txt && id -u && stat -c %u host.txt dir'), { text: 'done' }], {
      env: { AGENTD_IDLE_TIMEOUT_S: '2' },
    });
    const id = await harness.createConversation();
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    await waitForProcess(workdir, 15_000);
    // Written by the server's user (root) after the shell started, before any run.
    fs.writeFileSync(`${workdir}/host.txt`, 'from the host\n', { mode: 0o644 });
    fs.mkdirSync(`${workdir}/dir`, { mode: 0o755 });
    // The shell goes after the idle timeout without a run; the first run starts another, and is not told of a restart.
    await waitForNoProcess(workdir, 15_000);
    const observation = await runOnce(id);
    expect(observation.content).toContain('from the host\nmore\n');
    expect(observation.content).not.toMatch(/restarted|stopped after/);
    if (asRoot) {
      // The agent runs as its own uid, and owns what was put there.
      const [uid, fileOwner, dirOwner] = observation.content.trim().split('\n').slice(-3);
      expect(uid).not.toBe('0');
      expect([fileOwner, dirOwner]).toEqual([uid, uid]);
    }
  });

  it('started ahead, the first command still finds the files put there after the shell started owned by the agent', async () => {
    harness = await startAgentHarness([bash('echo more >> late.txt && cat late.txt && stat -c %u late.txt && id -u'), { text: 'done' }], { env: { AGENTD_IDLE_TIMEOUT_S: '60' } });
    const id = await harness.createConversation();
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    await waitForProcess(workdir, 15_000);
    const before = childrenMatching(workdir);
    fs.writeFileSync(`${workdir}/late.txt`, 'late\n', { mode: 0o644 });
    const observation = await runOnce(id);
    expect(observation.content).toContain('late\nmore\n');
    const [owner, uid] = observation.content.trim().split('\n').slice(-2);
    expect(owner).toBe(uid);
    // The shell started at creation ran it.
    expect(childrenMatching(workdir)).toEqual(before);
  });
});

describe('secrets put right after creation', () => {
  it("reach the shell started at creation even while it is still starting", async () => {
    harness = await startAgentHarness([bash('echo "late=${#LATE_TOKEN} removed=${#EARLY_TOKEN}"'), { text: 'done' }], { env: { AGENTD_IDLE_TIMEOUT_S: '60' } });
    const id = await harness.createConversation({ secrets: { EARLY_TOKEN: 'early-token-value-1' } });
    // At once, while the shell started for the new conversation is (most likely) still starting.
    expect((await harness.put(`/conversations/${id}/secrets`, { secrets: { LATE_TOKEN: 'late-token-value-22' } })).status).toBe(200);
    const removed = await fetch(`${harness.server.url}/conversations/${id}/secrets/EARLY_TOKEN`, { method: 'DELETE', headers: harness.server.auth });
    expect(removed.status).toBe(204);
    expect((await harness.post(`/conversations/${id}/messages`, { content: 'go' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle', 'error']);
    const [observation] = (await harness.events(id)).filter((event) => event.kind === 'observation');
    expect(observation.content).toContain('late=19 removed=0');
  });
});
