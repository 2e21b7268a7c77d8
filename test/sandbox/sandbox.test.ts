import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { NO_LIMITS } from '../../src/adapters/sandbox/resource-limits.js';
import { detectSandboxCgroups } from '../../src/adapters/sandbox/cgroups.js';
import { loadConfig } from '../../src/config.js';
import { selectProcessLauncher } from '../../src/adapters/sandbox/select-process-launcher.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { spawnServer, startServer, tempDir } from '../support/agentd.js';
import { runsIn } from '../support/processes.js';

/** Does bubblewrap run here (installed, allowed)? The suite is skipped, with the reason, when not. */
const probeDir = tempDir('agentd-sandbox-probe-state-');
const { fallbackReason } = await selectProcessLauncher({ requested: 'auto', limits: NO_LIMITS, searchPath: process.env.PATH ?? '', hiddenPaths: [], extraReadOnlyPaths: [], stateDir: probeDir });
fs.rmSync(probeDir, { recursive: true, force: true });
if (fallbackReason) console.warn(`test/sandbox/sandbox.test.ts skipped: bubblewrap cannot run here (${fallbackReason})`);

const PROCESS_LIMIT = 128;
const SANDBOX_ENV = {
  AGENTD_SANDBOX: 'bwrap',
  AGENTD_LIMIT_PROCESSES: String(PROCESS_LIMIT),
  AGENTD_LIMIT_MEMORY_MB: '1024',
  AGENTD_LIMIT_CPU_S: '60',
  // Server variables: only the one named in AGENTD_PASS_ENV may reach the agent.
  AGENTD_CANARY: 'canary-7c1e',
  OPENAI_API_KEY: 'sk-canary-7c1e',
  AGENTD_PASS_ENV: 'PASSED_VAR',
  PASSED_VAR: 'passed-value',
};

const bash = (command: string, extra: Record<string, unknown> = {}) => ({ toolCalls: [{ name: 'bash', arguments: { command, ...extra } }] });
const observations = (events: any[]) => events.filter((event) => event.kind === 'observation');
/** The processes whose current directory lies in `dir`, read from /proc (also once `dir` is deleted: the kernel then adds " (deleted)"). */
const processesIn = (dir: string): string[] => fs.readdirSync('/proc').filter((pid) => /^\d+$/.test(pid) && (runsIn(pid, dir) || runsIn(pid, `${dir} (deleted)`)));
const processesMatching = (pattern: string): string => {
  try {
    return execFileSync('pgrep', ['-a', '-f', pattern], { encoding: 'utf8' });
  } catch {
    return '';
  }
};

/** A script that reports what of the server it can see: nothing must come out as VISIBLE. */
function snoopScript(options: { dataDir: string; otherWorkdir: string }): string {
  const targets = ['master.key', 'secret.key', 'conversations', 'shells.jsonl'].map((name) => path.join(options.dataDir, name));
  targets.push(path.join(options.otherWorkdir, 'other-secret.txt'), `/proc/${process.pid}/environ`, `/proc/${process.pid}/cmdline`);
  return [
    `for f in ${targets.map((target) => `'${target}'`).join(' ')}; do if [ -e "$f" ] || cat "$f" >/dev/null 2>&1; then echo "VISIBLE $f"; else echo "hidden $f"; fi; done`,
    `echo "datadir: $(ls -A '${options.dataDir}' | tr '\\n' ' ')"`,
    `echo "workspaces: $(ls -A '${path.join(options.dataDir, 'workspaces')}' | tr '\\n' ' ')"`,
    'echo "canary in /proc: $(grep -l canary-7c1e /proc/[0-9]*/environ 2>/dev/null | wc -l)"',
    "env | grep -E '^(AGENTD_|OPENAI_|PASSED_VAR)' | sed 's/^/env: /'",
    'echo "uid: $(id -u)"',
  ].join('\n');
}

function expectNothingOfTheServer(output: string, options: { ownId: string }): void {
  expect(output).not.toContain('VISIBLE');
  expect(output).toContain('hidden');
  expect(output).toMatch(/^datadir: workspaces $/m);
  expect(output).toMatch(new RegExp(`^workspaces: ${options.ownId} $`, 'm'));
  expect(output).toContain('canary in /proc: 0');
  expect(output.match(/^env: .*/gm)).toEqual(['env: PASSED_VAR=passed-value']);
  if (process.geteuid?.() === 0) expect(output).not.toMatch(/^uid: 0$/m);
}

describe.skipIf(fallbackReason !== null)('bwrap sandbox', () => {
  let harness: AgentHarness;
  let otherWorkdir: string;
  const saved = { canary: process.env.AGENTD_CANARY };

  beforeAll(async () => {
    // The in-process server shares this process's environment: a leak through process.env would show.
    process.env.AGENTD_CANARY = 'canary-7c1e';
    // Its data dir is under os.tmpdir() (like every test's), where a bound /tmp would expose it.
    harness = await startAgentHarness([], { env: SANDBOX_ENV });
    fs.writeFileSync(path.join(harness.server.dataDir, 'master.key'), 'decoy-master-key\n', { mode: 0o600 });
    const other = await harness.post('/conversations', {});
    otherWorkdir = other.body.workdir;
    fs.writeFileSync(path.join(otherWorkdir, 'other-secret.txt'), 'other conversation\n');
  });

  // A test that failed midway leaves turns of its own unanswered: the next test starts on an empty script.
  beforeEach(() => harness?.llm.setScript([]));

  afterAll(async () => {
    if (saved.canary === undefined) delete process.env.AGENTD_CANARY;
    else process.env.AGENTD_CANARY = saved.canary;
    await harness?.close();
  });

  it('/info reports the bwrap mode and the limits', async () => {
    const { body } = await harness.get('/info');
    const wholeSandbox = detectSandboxCgroups({ limits: { memoryBytes: 1024 * 1024 * 1024, pids: PROCESS_LIMIT } }).cgroups ? 'cgroup' : 'rlimit';
    expect(body.sandbox).toMatchObject({ mode: 'bwrap', network: { default: true, host_allowed: false } });
    expect(body.sandbox.limits).toMatchObject({
      cpu_s: { value: 60, enforced_by: 'rlimit' },
      memory_mb: { value: 1024, enforced_by: wholeSandbox },
      processes: { value: PROCESS_LIMIT, enforced_by: wholeSandbox },
    });
  });

  it('POST /commands sees nothing of the server: data dir, keys, other workdirs, server /proc, server env', async () => {
    const id = (await harness.post('/conversations', {})).body.id as string;
    const { body } = await harness.post(`/conversations/${id}/commands`, { command: snoopScript({ dataDir: harness.server.dataDir, otherWorkdir }) });
    expectNothingOfTheServer(body.stdout, { ownId: id });
  });

  it("the agent's bash sees nothing of the server either, and deleting the conversation leaves no process", async () => {
    const marker = `sleep 97${Date.now() % 1000}`;
    harness.llm.push(bash(snoopScript({ dataDir: harness.server.dataDir, otherWorkdir })), bash(`${marker} &`), { text: 'done' });
    const id = await harness.createConversation({ initial_message: 'look around' });
    await harness.waitForStatus(id, ['idle', 'error']);
    const [snoop, background] = observations(await harness.events(id));
    expectNothingOfTheServer(snoop.content, { ownId: id });
    const uid = /^uid: (\d+)$/m.exec(snoop.content)?.[1] as string;
    expect(typeof background.data.pid).toBe('number');
    expect(processesMatching(marker)).not.toBe('');
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    expect(processesIn(workdir)).not.toEqual([]);
    expect((await fetch(`${harness.server.url}/conversations/${id}`, { method: 'DELETE', headers: harness.server.auth })).status).toBe(204);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(processesMatching(marker)).toBe('');
    // Nothing of the sandbox either: bwrap (its arguments name the workdir), no process in the workdir,
    expect(processesMatching(workdir)).toBe('');
    expect(processesIn(workdir)).toEqual([]);
    // and, when the server is root, nothing of the agent's uid (not root, the agent runs as the server's own uid).
    if (process.getuid?.() === 0) {
      expect(uid).not.toBe('0');
      expect(execFileSync('ps', ['-e', '-o', 'uid='], { encoding: 'utf8' }).split('\n').map((line) => line.trim())).not.toContain(uid);
    } else {
      expect(uid).toBe(String(process.getuid?.()));
    }
  });

  it('a fork bomb and a 10 GB allocation end with an error while the server keeps serving (/commands)', async () => {
    const id = (await harness.post('/conversations', {})).body.id as string;
    const started = Date.now();
    const bomb = await harness.post(`/conversations/${id}/commands`, { command: 'bomb() { bomb | bomb & }; bomb; sleep 30', timeout_s: 60 });
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(bomb.body.exit_code).not.toBe(0);
    expect(bomb.body.stdout).toContain(`limit of ${PROCESS_LIMIT} processes`);
    const allocation = await harness.post(`/conversations/${id}/commands`, {
      command: `node -e 'const chunks = []; for (let i = 0; i < 10; i++) chunks.push(Buffer.alloc(2 ** 30, 1)); console.log("allocated 10 GB")'`,
      timeout_s: 60,
    });
    expect(allocation.body.exit_code).not.toBe(0);
    expect(allocation.body.stdout).not.toContain('allocated');
    expect((await fetch(`${harness.server.url}/alive`)).status).toBe(200);
    expect((await harness.post(`/conversations/${id}/commands`, { command: 'echo still-works' })).body.stdout).toBe('still-works\n');
  });

  it("a fork bomb in the agent's shell ends with an error observation; the next command gets a fresh shell", async () => {
    harness.llm.push(bash(':(){ :|:& };:; sleep 30', { timeout_s: 40 }), bash('echo alive-after'), { text: 'done' });
    const id = await harness.createConversation({ initial_message: 'bomb' });
    await harness.waitForStatus(id, ['idle', 'error'], 30_000);
    const [bombed, after] = observations(await harness.events(id));
    expect(bombed.content).toContain(`limit of ${PROCESS_LIMIT} processes`);
    expect(bombed.data.exit_code).toBe(137);
    expect(after.content).toContain('alive-after');
    expect((await fetch(`${harness.server.url}/alive`)).status).toBe(200);
  });

  it('sandbox.network=false leaves only a loopback of its own; the default reaches no host loopback service either', async () => {
    const listener = net.createServer((socket) => socket.on('error', () => undefined).end('hello\n'));
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const port = (listener.address() as net.AddressInfo).port;
    const probe = `grep -c : /proc/net/dev; if exec 3<>/dev/tcp/127.0.0.1/${port}; then echo connected; else echo refused; fi`;
    try {
      const offline = await harness.post('/conversations', { sandbox: { network: false } });
      expect(offline.body.sandbox).toEqual({ network: false });
      const isolated = await harness.post(`/conversations/${offline.body.id}/commands`, { command: probe });
      expect(isolated.body.stdout).toMatch(/^1\n(.|\n)*refused\n$/);
      const online = await harness.post('/conversations', {});
      expect(online.body.sandbox).toEqual({ network: true });
      // The default network (user-mode, sandbox-network.test.ts) does not reach the host's loopback.
      expect((await harness.post(`/conversations/${online.body.id}/commands`, { command: probe })).body.stdout).toContain('refused');

      harness.llm.push(bash(probe), { text: 'done' });
      const agentId = await harness.createConversation({ sandbox: { network: false }, initial_message: 'net' });
      await harness.waitForStatus(agentId, ['idle', 'error']);
      expect(observations(await harness.events(agentId))[0].content).toContain('refused');
    } finally {
      listener.close();
    }
  });
});

describe.skipIf(fallbackReason !== null)('a read-only path inside /tmp (AGENTD_SANDBOX_RO_PATHS)', () => {
  it('is visible, and read-only, over the sandbox\'s private /tmp (a checkout under /tmp holding a tool or an MCP server)', async () => {
    // os.tmpdir() is the directory the sandbox covers with its own tmpfs (where CI may clone the repository).
    const tools = tempDir('agentd-ro-tools-');
    fs.chmodSync(tools, 0o755); // like any installed tree: the agent's uid may read it
    fs.writeFileSync(path.join(tools, 'tool.sh'), 'echo tool-ran\n', { mode: 0o755 });
    const harness = await startAgentHarness([], { env: { ...SANDBOX_ENV, AGENTD_SANDBOX_RO_PATHS: tools } });
    try {
      const id = (await harness.post('/conversations', {})).body.id as string;
      const { body } = await harness.post(`/conversations/${id}/commands`, { command: `bash ${tools}/tool.sh; touch ${tools}/written 2>/dev/null && echo writable || echo read-only` });
      expect(body.stdout, body.stderr).toBe('tool-ran\nread-only\n');
      expect(fs.existsSync(path.join(tools, 'written'))).toBe(false);
    } finally {
      await harness.close();
      fs.rmSync(tools, { recursive: true, force: true });
    }
  });
});

describe.skipIf(fallbackReason !== null)('every read-only path of the sandbox refuses a write', () => {
  it('system dirs, the /etc allowlist, the identity files, AGENTD_SANDBOX_RO_PATHS and a tool installed outside the system dirs', async () => {
    // Decoys anyone on the host may write (0777 dirs, 0666 files): only the read-only mount can refuse the agent.
    const base = tempDir('agentd-ro-every-');
    fs.chmodSync(base, 0o755);
    const extra = path.join(base, 'extra');
    const tool = path.join(base, 'tool');
    for (const dir of [extra, path.join(tool, 'bin'), path.join(tool, 'lib')]) fs.mkdirSync(dir, { recursive: true });
    fs.writeFileSync(path.join(extra, 'data.txt'), 'extra-original\n');
    fs.writeFileSync(path.join(tool, 'lib', 'module.js'), 'tool-original\n');
    // An `rg` on the agent's PATH outside the system dirs: its installation (the dir above bin/) is bound.
    fs.writeFileSync(path.join(tool, 'bin', 'rg'), '#!/bin/sh\nPATH=/usr/bin:/bin exec rg "$@"\n');
    for (const dir of [extra, tool, path.join(tool, 'bin'), path.join(tool, 'lib')]) fs.chmodSync(dir, 0o777);
    for (const file of [path.join(extra, 'data.txt'), path.join(tool, 'lib', 'module.js')]) fs.chmodSync(file, 0o666);
    fs.chmodSync(path.join(tool, 'bin', 'rg'), 0o777);
    const before = snapshot(base);

    const systemDirs = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/nix/store'].filter((dir) => fs.existsSync(dir));
    const etcDirs = ['/etc/ssl', '/etc/alternatives', '/etc/ca-certificates', '/etc/ld.so.conf.d'].filter((dir) => fs.existsSync(dir));
    const dirs = ['/', '/etc', ...systemDirs, ...etcDirs, extra, tool, path.join(tool, 'bin'), path.join(tool, 'lib')];
    // Files are checked by their mount (a write to one the agent may not write fails before the mount is asked).
    const files = ['/etc/passwd', '/etc/group', '/etc/gitconfig', '/etc/hosts', path.join(extra, 'data.txt'), path.join(tool, 'lib', 'module.js'), path.join(tool, 'bin', 'rg')];
    const writable = [path.join(extra, 'data.txt'), path.join(tool, 'lib', 'module.js')];
    const probe = `agentd-ro-probe-${Date.now()}`;
    const script = [
      // mkdir of a new name: a read-only mount answers EROFS before any permission check.
      ...dirs.map((dir) => `r=$(mkdir '${dir}/${probe}' 2>&1) && r=WRITABLE; echo "dir ${dir} $(readlink -f '${dir}') \${r##*: }"`),
      ...files.map((file) => `echo "file ${file} $(readlink -f '${file}')"`),
      // Decoys the agent's uid may write: only the mount stands in the way.
      ...writable.map((file) => `r=$( { echo pwned >> '${file}'; } 2>&1) && r=WRITABLE; echo "write ${file} \${r##*: }"`),
      'sed "s/^/mount /" /proc/self/mountinfo',
    ].join('\n');

    const harness = await startAgentHarness([], { env: { ...SANDBOX_ENV, AGENTD_SANDBOX_RO_PATHS: extra, AGENTD_AGENT_PATH: `${path.join(tool, 'bin')}:/usr/local/bin:/usr/bin:/bin` } });
    try {
      const id = (await harness.post('/conversations', {})).body.id as string;
      const { body } = await harness.post(`/conversations/${id}/commands`, { command: script, timeout_s: 30 });
      const out = body.stdout as string;
      const mounts = out.split('\n').filter((line) => line.startsWith('mount ')).map((line) => {
        const fields = line.split(' ');
        return { point: fields[5]!.replace(/\\040/g, ' '), options: fields[6]!.split(',') };
      });
      /** The mount a path lives on (the last mounted over it wins), by its path inside the sandbox. */
      const mountOf = (real: string) => mounts.filter((mount) => real === mount.point || real.startsWith(mount.point === '/' ? '/' : `${mount.point}/`)).sort((a, b) => a.point.length - b.point.length).at(-1);
      const report: string[] = [];
      for (const dir of dirs) {
        const line = new RegExp(`^dir ${escape(dir)} (\\S+) (.*)$`, 'm').exec(out);
        expect(line, `${dir} in ${out}`).not.toBeNull();
        const [, real, result] = line!;
        report.push(`${dir}: ${result} [${mountOf(real!)?.options.includes('ro') ? 'ro' : 'rw'}]`);
      }
      for (const file of files) {
        const real = new RegExp(`^file ${escape(file)} (\\S+)$`, 'm').exec(out)?.[1];
        expect(real, `${file} in ${out}`).toBeDefined();
        report.push(`${file}: [${mountOf(real!)?.options.includes('ro') ? 'ro' : 'rw'}]`);
      }
      for (const file of writable) report.push(`write ${file}: ${new RegExp(`^write ${escape(file)} (.*)$`, 'm').exec(out)?.[1]}`);
      expect(report).toEqual([
        ...dirs.map((dir) => `${dir}: Read-only file system [ro]`),
        ...files.map((file) => `${file}: [ro]`),
        ...writable.map((file) => `write ${file}: Read-only file system`),
      ]);
      // And on the host: not a byte changed, nothing added.
      expect(snapshot(base)).toEqual(before);
    } finally {
      await harness.close();
      fs.rmSync(base, { recursive: true, force: true });
    }
  });
});

/** Every entry under `dir` with its mode and content (files), to compare before and after. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const file = path.join(entry.parentPath, entry.name);
    const stat = fs.lstatSync(file);
    out[file] = `${stat.mode.toString(8)} ${stat.isFile() ? fs.readFileSync(file, 'utf8') : ''}`;
  }
  return out;
}

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

describe('sandbox modes', () => {
  it('config: AGENTD_SANDBOX, the limits and AGENTD_PASS_ENV are parsed once, with clear errors', () => {
    const config = loadConfig({ AGENTD_PASS_ENV: 'A_B, C', A_B: '1', PATH: '/x', OTHER: 'no', AGENTD_LIMIT_CPU_S: '0', AGENTD_SANDBOX_RO_PATHS: '/opt/tools' });
    expect(config.sandbox).toEqual({
      mode: 'auto',
      network: { default: true, hostAllowed: false, helper: 'auto' },
      readOnlyPaths: ['/opt/tools'],
      cgroups: true,
      limits: { cpuSeconds: null, memoryMb: 4096, processes: 1024, fileMb: 4096, tmpMb: 1024, workdirMb: 20_480 },
    });
    expect(config.agentEnv).toEqual({ passEnv: ['A_B', 'C'], hostEnv: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', A_B: '1' } });
    expect(() => loadConfig({ AGENTD_SANDBOX: 'docker' })).toThrow(/invalid AGENTD_SANDBOX/);
    expect(() => loadConfig({ AGENTD_LIMIT_PROCESSES: '5' })).toThrow(/AGENTD_LIMIT_PROCESSES: must be 0 \(no limit\) or at least 16/);
    expect(() => loadConfig({ AGENTD_PASS_ENV: 'BAD NAME' })).toThrow(/AGENTD_PASS_ENV/);
    expect(() => loadConfig({ AGENTD_SANDBOX_RO_PATHS: 'relative/path' })).toThrow(/AGENTD_SANDBOX_RO_PATHS/);
  });

  it('none: /info says so and the limits still apply to commands; sandbox settings survive a restart', async () => {
    const dataDir = tempDir();
    let server = await startServer({ dataDir, env: { AGENTD_SANDBOX: 'none', AGENTD_LIMIT_MEMORY_MB: '2048' } });
    const offline = (await server.services.conversations.create({ max_iterations_per_run: 1, confirmation_mode: false, sandbox: { network: false } })).conversation.id;
    await server.close();
    server = await startServer({ dataDir, env: { AGENTD_SANDBOX: 'none', AGENTD_LIMIT_MEMORY_MB: '2048' } });
    try {
      expect(server.services.conversations.get(offline).sandbox).toEqual({ network: false });
      expect(server.services.sandbox.warning).toMatch(/unsandboxed on the host/);
      const info = await fetch(`${server.url}/info`, { headers: server.auth }).then((response) => response.json() as Promise<any>);
      expect(info.sandbox).toMatchObject({ mode: 'none', limits: { memory_mb: { value: 2048, enforced_by: 'rlimit' }, tmp_mb: { value: 1024, enforced_by: 'none' } } });
      const id = (await server.services.conversations.create({ max_iterations_per_run: 1, confirmation_mode: false })).conversation.id;
      const result = await server.services.commands.run(id, { command: 'ulimit -v', timeout_s: 10 });
      expect(result.stdout).toBe(`${2048 * 1024}\n`);
    } finally {
      await server.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('auto without bubblewrap falls back to none with one warning at start-up', async () => {
    const dataDir = tempDir();
    // A default LLM keeps the no-LLM warning out of the count: this test is about the sandbox's.
    const server = await spawnServer({ dataDir, env: { AGENTD_SANDBOX: 'auto', AGENTD_AGENT_PATH: '/nonexistent', AGENTD_LLM_MODEL: 'test-model' } });
    try {
      const warnings = server.output().split('\n').filter((line) => line.startsWith('agentd: WARNING'));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/bwrap program is not installed.*unsandboxed on the host/);
      const info = await fetch(`${server.url}/info`, { headers: { authorization: 'Bearer test-master-key' } }).then((response) => response.json() as Promise<any>);
      expect(info.sandbox.mode).toBe('none');
      const health = (await fetch(`${server.url}/health`).then((response) => response.json())) as any;
      expect(health.status).toBe('degraded');
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('bwrap that cannot start is a start-up error, not a silent downgrade', async () => {
    const dataDir = tempDir();
    try {
      await expect(spawnServer({ dataDir, env: { AGENTD_SANDBOX: 'bwrap', AGENTD_AGENT_PATH: '/nonexistent' } })).rejects.toThrow(/failed to start: AGENTD_SANDBOX=bwrap, but bubblewrap cannot run here/);
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
