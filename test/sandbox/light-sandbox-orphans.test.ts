/**
 * kill -9 of a server while its checkpoints' git runs in light sandbox starts (ProcessSpec.light,
 * run by the spawner): within a few seconds no process of those sandboxes is left (found by the
 * test's data dir, which their command line and current directory name). bwrap's monitor lets
 * its child (the sandbox's init to be) go on only after its clone, once it has dropped its
 * privileges and armed --die-with-parent: a monitor killed in between (the spawner kills what it
 * runs once the server is gone) leaves that child waiting for the word forever, in namespaces of
 * its own, with no watchdog.
 * - Held there: strace delays every capset of the spawner's processes (the monitor's first system
 *   call after its clone), so the kill lands in that window every time.
 * - At random moments: rounds of concurrent checkpoints (a file written, then GET /changes), the
 *   server killed after a random delay. `AGENTD_HEAVY_TESTS=1`: more rounds.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SANDBOX_GIT_DIR } from '../../src/adapters/git/git-program.js';
import { findInPath } from '../../src/adapters/sandbox/mounts.js';
import { NO_LIMITS } from '../../src/adapters/sandbox/resource-limits.js';
import { selectProcessLauncher } from '../../src/adapters/sandbox/select-process-launcher.js';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { spawnServer, tempDir, type SpawnedServer } from '../support/agentd.js';
import { commandLineOf } from '../support/processes.js';
import { apiClient, processesUsing, scaled, sleep, until, type Api } from '../support/reliability.js';

const probeDir = tempDir('agentd-orphans-probe-');
const { fallbackReason } = await selectProcessLauncher({ requested: 'auto', limits: NO_LIMITS, searchPath: process.env.PATH ?? '', hiddenPaths: [], extraReadOnlyPaths: [], stateDir: probeDir });
fs.rmSync(probeDir, { recursive: true, force: true });
if (fallbackReason) console.warn(`test/sandbox/light-sandbox-orphans.test.ts skipped: bubblewrap cannot run here (${fallbackReason})`);
const strace = findInPath('strace', process.env.PATH ?? '/usr/bin:/bin');
if (!strace) console.warn('test/sandbox/light-sandbox-orphans.test.ts: strace is not installed, the held window is not tested (apt-get install strace)');

/** How long the processes of a killed server's sandboxes may take to go. */
const GONE_WITHIN_MS = 5_000;
const ROUNDS = scaled(4, 30);
const CONVERSATIONS = 4;

let server: SpawnedServer | null = null;
let llm: FakeLlm | null = null;
let tracer: ChildProcess | null = null;
const dataDirs: string[] = [];

afterEach(async () => {
  server?.child.kill('SIGKILL');
  server = null;
  tracer?.kill('SIGKILL');
  tracer = null;
  await llm?.close();
  llm = null;
  // Whatever a failed check left: processes of this test's own servers only (their command line or directory names its data dir).
  for (const dir of dataDirs.splice(0)) {
    for (const line of processesUsing(dir)) signal(Number(line.split(' ')[0]));
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

function signal(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone
  }
}

async function start(dataDir: string): Promise<Api> {
  server = await spawnServer({ dataDir, env: { AGENTD_WARM_SHELLS: '0' } });
  return apiClient(server.url);
}

/** kill -9, then what of the server's sandboxes is still there after GONE_WITHIN_MS (nothing, normally much sooner). */
async function killAndLook(dataDir: string): Promise<string[]> {
  const dying = server!;
  server = null;
  dying.child.kill('SIGKILL');
  await dying.exited;
  return leftAfterwards(dataDir);
}

/** The processes of this data dir still there once they had GONE_WITHIN_MS to go. */
async function leftAfterwards(dataDir: string): Promise<string[]> {
  await until(() => processesUsing(dataDir).length === 0, 'the killed server’s processes to be gone', GONE_WITHIN_MS).catch(() => undefined);
  return processesUsing(dataDir);
}

/** A conversation whose run ran `bash` (its shell keeps the spawner running) and took its first checkpoint. */
async function conversationWithCheckpoint(api: Api, llmUrl: string): Promise<{ id: string; workdir: string }> {
  const created = await api.post('/conversations', { llm: { model: 'fake', base_url: llmUrl, api_key: 'k' }, initial_message: 'start' });
  expect(created.status, created.text).toBe(201);
  const { id, workdir } = created.json() as { id: string; workdir: string };
  await until(async () => (await api.get(`/conversations/${id}`)).json().status === 'idle', `conversation ${id} idle`, 30_000);
  expect((await api.get(`/conversations/${id}/checkpoints`)).json().items.length).toBeGreaterThan(0);
  return { id, workdir };
}

/** A change in the workdir, then GET /changes: a snapshot, so git in a light sandbox start. */
async function checkpoint(api: Api, conversation: { id: string; workdir: string }, n: number): Promise<void> {
  fs.writeFileSync(path.join(conversation.workdir, `f${n % 5}.txt`), `${n}\n`);
  await api.get(`/conversations/${conversation.id}/changes?limit=1`);
}

/** The pid and parent of every live process, from /proc/<pid>/stat. */
function processTable(): Array<{ pid: number; ppid: number; name: string }> {
  const table: Array<{ pid: number; ppid: number; name: string }> = [];
  for (const entry of fs.readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const [state, parent] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (state !== 'Z') table.push({ pid: Number(entry), ppid: Number(parent), name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) });
    } catch {
      // gone meanwhile
    }
  }
  return table;
}

/** A light start's bwrap (it binds the shadow repository) of this data dir whose parent is one too: a monitor has cloned its child. */
function clonedBwrap(dataDir: string): number | undefined {
  const table = processTable();
  const light = (pid: number) => commandLineOf(pid)?.includes(dataDir) && commandLineOf(pid)?.includes(SANDBOX_GIT_DIR);
  const ours = new Set(table.filter((entry) => entry.name === 'bwrap' && light(entry.pid)).map((entry) => entry.pid));
  return table.find((entry) => ours.has(entry.pid) && ours.has(entry.ppid))?.pid;
}

describe.skipIf(fallbackReason !== null || process.env.AGENTD_SANDBOX === 'none')('a server killed with -9 while its checkpoints’ git starts in light sandboxes', () => {
  it.skipIf(strace === null)('leaves nothing when the kill lands between bwrap’s clone and its word to the child', { timeout: 90_000 }, async () => {
    const dataDir = tempDir('agentd-orphans-held-');
    dataDirs.push(dataDir);
    llm = await startFakeLlm({ script: [{ toolCalls: [{ name: 'bash', arguments: { command: 'true' } }] }, { text: 'ready' }] });
    const api = await start(dataDir);
    const conversation = await conversationWithCheckpoint(api, llm.url);
    const spawner = processTable().find((entry) => entry.ppid === server!.child.pid && /spawnerMain|__spawner/.test(commandLineOf(entry.pid) ?? ''));
    expect(spawner, 'the server’s spawner (kept by the conversation’s shell)').toBeDefined();
    tracer = spawn(strace!, ['-f', '-qq', '-o', '/dev/null', '-e', 'trace=capset', '-e', 'inject=capset:delay_enter=60000000', '-p', String(spawner!.pid)], { stdio: 'ignore' });
    await until(() => fs.readFileSync(`/proc/${spawner!.pid}/status`, 'utf8').includes(`TracerPid:\t${tracer!.pid}\n`), 'strace to hold the spawner', 10_000);

    void checkpoint(api, conversation, 1).catch(() => undefined);
    await until(() => clonedBwrap(dataDir) !== undefined, 'a light start’s bwrap to have cloned its child', 20_000);

    // The spawner kills what it runs once the server is gone, and exits; then strace lets go of
    // what it held (a traced process killed waits for its tracer before it is gone).
    const dying = server!;
    server = null;
    dying.child.kill('SIGKILL');
    await dying.exited;
    await until(() => !processTable().some((entry) => entry.pid === spawner!.pid), 'the spawner to exit', GONE_WITHIN_MS);
    const held = tracer;
    tracer = null;
    held.kill('SIGKILL');
    await new Promise((resolve) => (held.exitCode !== null || held.signalCode !== null ? resolve(null) : held.once('exit', resolve)));
    expect(await leftAfterwards(dataDir)).toEqual([]);
  });

  it(`leaves nothing after kills at random moments among concurrent checkpoints (${ROUNDS} rounds)`, { timeout: scaled(90_000, 600_000) }, async () => {
    const dataDir = tempDir('agentd-orphans-random-');
    dataDirs.push(dataDir);
    llm = await startFakeLlm({ whenExhausted: { text: 'ready' } });
    let api = await start(dataDir);
    const conversations = [];
    for (let index = 0; index < CONVERSATIONS; index++) conversations.push(await conversationWithCheckpoint(api, llm.url));
    const leftovers: string[] = [];
    let checkpoints = 0;
    for (let round = 0; round < ROUNDS; round++) {
      if (round > 0) api = await start(dataDir);
      let killed = false;
      const before = checkpoints;
      const loops = conversations.map(async (conversation) => {
        for (let n = 0; !killed; n++) {
          try {
            await checkpoint(api, conversation, n);
            checkpoints++;
          } catch {
            return; // the server is gone
          }
        }
      });
      // The kill comes once checkpoints are under way (a loaded machine may take the whole window
      // for the first), at a random moment among the next ones.
      await until(() => checkpoints > before, 'a first checkpoint of the round', 60_000);
      await sleep(200 + Math.random() * 600);
      killed = true;
      const left = await killAndLook(dataDir);
      await Promise.all(loops);
      leftovers.push(...left.map((line) => `round ${round}: ${line}`));
      for (const line of left) signal(Number(line.split(' ')[0]));
    }
    expect(checkpoints).toBeGreaterThan(ROUNDS);
    expect(leftovers).toEqual([]);
  });
});
