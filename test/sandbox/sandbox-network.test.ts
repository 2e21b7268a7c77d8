import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { NO_LIMITS } from '../../src/adapters/sandbox/resource-limits.js';
import { selectProcessLauncher } from '../../src/adapters/sandbox/select-process-launcher.js';
import { findNetworkHelper, noNetworkHelper, type NetworkHelper } from '../../src/adapters/sandbox/network.js';
import { BwrapProcessLauncher } from '../../src/adapters/sandbox/bwrap-launcher.js';
import { BashShellFactory } from '../../src/adapters/shell/bash-shell.js';
import { findInPath } from '../../src/adapters/sandbox/mounts.js';
import { loadConfig } from '../../src/config.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { CLI, spawnServer, startServer, tempDir, TEST_KEY } from '../support/agentd.js';

/**
 * The agent's network: by default a namespace with user-mode networking (slirp4netns, else pasta;
 * AGENTD_SANDBOX_NETWORK_HELPER names one), out of reach of the host's loopback (the server itself,
 * other local services). Every connection attempt here aims at 127.0.0.0/8 or ::1; nothing is sent
 * to the internet or to the namespace's gateway. What both helpers must do is tested with each
 * one installed here.
 */
const probeDir = tempDir('agentd-network-probe-state-');
const selection = await selectProcessLauncher({ requested: 'auto', limits: NO_LIMITS, searchPath: process.env.PATH ?? '', hiddenPaths: [], extraReadOnlyPaths: [], stateDir: probeDir });
fs.rmSync(probeDir, { recursive: true, force: true });
const skipReason = selection.fallbackReason ?? selection.networkFallbackReason;
if (skipReason) console.warn(`test/sandbox/sandbox-network.test.ts: sandbox network tests skipped (${skipReason})`);

/** The helpers installed here: each is tested as the server's (AGENTD_SANDBOX_NETWORK_HELPER). */
const installedHelpers = (['slirp4netns', 'pasta'] as const).flatMap((kind) => findNetworkHelper(process.env.PATH ?? '', kind) ?? []);
if (!skipReason && installedHelpers.length < 2) console.warn(`test/sandbox/sandbox-network.test.ts: only ${installedHelpers.map((helper) => helper.kind).join(', ')} installed: the other helper's tests skipped`);

const bash = (command: string) => ({ toolCalls: [{ name: 'bash', arguments: { command } }] });

// The tests below skip when no helper attaches here; that must be the host's doing, not ours: a
// helper installed beside a working bwrap and the tun device attaches (a broken wait in the
// launch script made every one of these tests skip instead of fail).
describe.skipIf(installedHelpers.length === 0 || selection.fallbackReason !== null || !fs.existsSync('/dev/net/tun'))('where a helper is installed, bwrap runs and /dev/net/tun exists', () => {
  it('the network helper attaches', () => {
    expect(selection.networkFallbackReason).toBeNull();
    expect(selection.networkHelper?.kind).toBe(installedHelpers[0]!.kind);
  });
});

/** One line per target: `<host>:<port> connected|refused` (bash's /dev/tcp, 2 s at most each). */
function reachScript(targets: { host: string; port: number }[]): string {
  return targets
    .map(({ host, port }) => `if timeout 2 bash -c 'exec 3<>/dev/tcp/${host}/${port}' 2>/dev/null; then echo "${host}:${port} connected"; else echo "${host}:${port} refused"; fi`)
    .join('\n');
}

async function listen(host: string): Promise<{ server: net.Server; port: number }> {
  const server = net.createServer((socket) => socket.on('error', () => undefined).end('hello\n'));
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return { server, port: (server.address() as net.AddressInfo).port };
}

describe.skipIf(Boolean(skipReason)).each(installedHelpers)('sandbox network through $kind', (networkHelper) => {
  let harness: AgentHarness;
  let v4: { server: net.Server; port: number };
  let v6: { server: net.Server; port: number } | null = null;
  let targets: { host: string; port: number }[];

  // A test that failed midway leaves turns of its own unanswered: the next test starts on an empty script.
  beforeEach(() => harness?.llm.setScript([]));

  beforeAll(async () => {
    harness = await startAgentHarness([], { env: { AGENTD_SANDBOX: 'bwrap', AGENTD_SANDBOX_NETWORK_HOST: 'true', AGENTD_SANDBOX_NETWORK_HELPER: networkHelper.kind } });
    v4 = await listen('127.0.0.1');
    try {
      v6 = await listen('::1');
    } catch {
      v6 = null; // no IPv6 loopback here
    }
    const serverPort = Number(new URL(harness.server.url).port);
    targets = [
      { host: '127.0.0.1', port: serverPort },
      { host: '127.0.0.1', port: v4.port },
      { host: 'localhost', port: v4.port },
      ...(v6 ? [{ host: '::1', port: v6.port }] : []),
    ];
  });

  afterAll(async () => {
    v4?.server.close();
    v6?.server.close();
    await harness?.close();
  });

  it('/info reports the network policy in force', async () => {
    const { body } = await harness.get('/info');
    expect(body.sandbox.network).toEqual({ default: true, user_mode: networkHelper.kind, host_allowed: true, note: null });
  });

  it('by default neither the server nor another loopback service is reachable (commands API and agent bash); with "host" both are', async () => {
    const created = await harness.post('/conversations', {});
    expect(created.body.sandbox).toEqual({ network: true });
    const viaCommands = await harness.post(`/conversations/${created.body.id}/commands`, { command: reachScript(targets), timeout_s: 60 });
    for (const { host, port } of targets) expect(viaCommands.body.stdout).toContain(`${host}:${port} refused`);

    harness.llm.push(bash(reachScript(targets)), { text: 'done' });
    const agentId = await harness.createConversation({ initial_message: 'reach the server' });
    await harness.waitForStatus(agentId, ['idle', 'error'], 60_000);
    const observation = (await harness.events(agentId)).find((event) => event.kind === 'observation');
    for (const { host, port } of targets) expect(observation.content).toContain(`${host}:${port} refused`);

    // The same probe does see them with the host's network: the test can tell.
    const hostNet = await harness.post('/conversations', { sandbox: { network: 'host' } });
    expect(hostNet.body.sandbox).toEqual({ network: 'host' });
    const shared = await harness.post(`/conversations/${hostNet.body.id}/commands`, { command: reachScript(targets), timeout_s: 60 });
    for (const { host, port } of targets) expect(shared.body.stdout).toContain(`${host}:${port} connected`);
  }, 120_000);

  it('the default namespace has an interface of its own, configured with a default route; false has only loopback', async () => {
    const show = 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " " | tr "\\n" " "; echo; awk \'$2 == "00000000" { print "default via " $1 }\' /proc/net/route';
    const online = await harness.post('/conversations', {});
    const { stdout } = (await harness.post(`/conversations/${online.body.id}/commands`, { command: show })).body;
    const interfaces = stdout.split('\n')[0].trim().split(' ');
    expect(interfaces).toContain('lo');
    const tap = interfaces.find((name: string) => name !== 'lo');
    expect(tap).toBeDefined();
    expect(stdout).toContain(`default via ${tap}`);
    const offline = await harness.post('/conversations', { sandbox: { network: false } });
    expect((await harness.post(`/conversations/${offline.body.id}/commands`, { command: show })).body.stdout).toBe('lo \n');
  });

  it('a finished command leaves no network helper behind', async () => {
    const id = (await harness.post('/conversations', {})).body.id as string;
    // Helpers of this (in-process) server: children of bwrap's monitor, a child of this process.
    const ours = () => helpersOf(process.pid, path.basename(networkHelper.path));
    // Agents' persistent shells of the other tests hold helpers of their own: those stay.
    const before = ours().filter(alive);
    const during = await harness.post(`/conversations/${id}/commands`, { command: `cat /proc/net/route | wc -l` });
    expect(Number(during.body.stdout.trim())).toBeGreaterThan(1);
    expect(ours().filter(alive)).toEqual(before);
  });

  it("a command's stderr is only its own: the network helper's end is not reported on it", async () => {
    // The helper is killed when the sandbox exits; the launch's bash, which used to wait for bwrap
    // beside it, reported that job ("Killed") on the stderr it shares with the command, now and
    // then (seen as a hook's block reason).
    const id = (await harness.post('/conversations', {})).body.id as string;
    for (let i = 0; i < 25; i++) {
      const { body } = await harness.post(`/conversations/${id}/commands`, { command: `echo out ${i}; echo err ${i} >&2` });
      expect({ i, stdout: body.stdout, stderr: body.stderr }).toEqual({ i, stdout: `out ${i}\n`, stderr: `err ${i}\n` });
    }
  });
});

/** Processes started as `name` (argv[0]'s base name: pasta keeps it when it re-executes itself as passt.avx2) whose parent's parent is `ancestor`. */
function helpersOf(ancestor: number, name: string): number[] {
  const parentOf = (pid: number) => Number(/^PPid:\s+(\d+)$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
  return fs.readdirSync('/proc').filter((entry) => /^\d+$/.test(entry)).map(Number).filter((pid) => {
    try {
      const argv0 = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0]!;
      return path.basename(argv0) === name && parentOf(parentOf(pid)) === ancestor;
    } catch {
      return false;
    }
  });
}

/** Processes started as `name` (as helpersOf) with `ancestor` anywhere above them: pasta's parent is its side (a bash), whose parent is bwrap's monitor. */
function startedBelow(ancestor: number, name: string): number[] {
  const parentOf = (pid: number) => Number(/^PPid:\s+(\d+)$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
  const below = (pid: number): boolean => {
    for (let at = parentOf(pid); at > 1; at = parentOf(at)) if (at === ancestor) return true;
    return false;
  };
  return fs.readdirSync('/proc').filter((entry) => /^\d+$/.test(entry)).map(Number).filter((pid) => {
    try {
      return path.basename(fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0]!) === name && below(pid);
    } catch {
      return false;
    }
  });
}

const alive = (pid: number) => fs.existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));

async function until(condition: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * A sandbox through `networkHelper` (its state dir, with a decoy file, hidden from it as a server's
 * data dir is) whose program waits, and `inspect` given the spawned process (bwrap's monitor), the
 * helper's side (the monitor's child beside the sandbox's init: slirp4netns itself, or the bash
 * that started pasta) and the helper; every process of it is killed after.
 */
async function inRunningSandbox(networkHelper: NetworkHelper, inspect: (pids: { spawned: number; side: number; helper: number }) => Promise<void> | void): Promise<void> {
  const stateDir = tempDir();
  const workdir = fs.realpathSync(tempDir());
  fs.writeFileSync(path.join(stateDir, 'decoy'), 'not for the sandbox or its helper');
  const launcher = new BwrapProcessLauncher({ bwrapPath: findInPath('bwrap', process.env.PATH ?? '')!, limits: NO_LIMITS, hiddenPaths: [stateDir], stateDir, searchPath: process.env.PATH ?? '', networkHelper });
  await launcher.ready({ workdir, network: true });
  const spec = launcher.prepare({ command: 'bash', args: ['-c', 'echo up; read -r line'], cwd: workdir, env: { PATH: process.env.PATH ?? '', HOME: workdir }, sandbox: { workdir, network: true } });
  const child = spawn(spec.command, spec.args, { cwd: spec.cwd, env: spec.env, detached: true, stdio: ['pipe', 'pipe', 'inherit'] });
  try {
    await new Promise((resolve) => child.stdout!.once('data', resolve));
    // pasta's comm: `pasta`, `pasta.avx2` (started as its AVX2 build) or `passt.avx2` (re-executed as it).
    const helperNames = networkHelper.kind === 'pasta' ? /^pas(ta|st)/ : /^slirp4netns/;
    const children = (pid: number) => fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(' ').filter(Boolean).map(Number);
    const named = (pid: number) => fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
    const spawned = child.pid!;
    const side = children(spawned).find((pid) => named(pid) !== 'bwrap');
    expect(side, `the helper's side among ${children(spawned).map(named).join(', ')}`).toBeDefined();
    const helper = [side!, ...children(side!)].find((pid) => helperNames.test(named(pid)));
    expect(helper, `the helper among ${[side!, ...children(side!)].map(named).join(', ')}`).toBeDefined();
    await inspect({ spawned, side: side!, helper: helper! });
  } finally {
    process.kill(-child.pid!, 'SIGKILL');
    fs.rmSync(stateDir, { recursive: true, force: true });
    fs.rmSync(workdir, { recursive: true, force: true });
  }
}

const slirp = findInPath('slirp4netns', process.env.PATH ?? '');
describe.skipIf(Boolean(skipReason) || slirp === null)('slirp4netns', () => {
  it('gives a configured tap interface and no way to the host loopback, not even through its gateway 10.0.2.2', async () => {
    const stateDir = tempDir();
    const workdir = fs.realpathSync(tempDir());
    const listener = await listen('127.0.0.1');
    try {
      const launcher = new BwrapProcessLauncher({ bwrapPath: findInPath('bwrap', process.env.PATH ?? '')!, limits: NO_LIMITS, hiddenPaths: [], stateDir, searchPath: process.env.PATH ?? '', networkHelper: { kind: 'slirp4netns', path: slirp! } });
      // 10.0.2.2 is slirp4netns's own virtual gateway inside the namespace: it would be the host's loopback without --disable-host-loopback.
      const script = `awk '$2 == "00000000" { print "default via " $1 }' /proc/net/route\n${reachScript([{ host: '127.0.0.1', port: listener.port }, { host: '10.0.2.2', port: listener.port }])}`;
      const spec = launcher.prepare({ command: 'bash', args: ['-c', script], cwd: workdir, env: { PATH: process.env.PATH ?? '', HOME: workdir }, sandbox: { workdir, network: true } });
      const output = execFileSync(spec.command, spec.args, { cwd: spec.cwd, env: spec.env, encoding: 'utf8', timeout: 30_000 });
      expect(output).toContain('default via tap0');
      expect(output).toContain(`127.0.0.1:${listener.port} refused`);
      expect(output).toContain(`10.0.2.2:${listener.port} refused`);
    } finally {
      listener.server.close();
      fs.rmSync(stateDir, { recursive: true, force: true });
      fs.rmSync(workdir, { recursive: true, force: true });
    }
  }, 60_000);

  it('confines itself once attached (it parses what the agent sends): a syscall filter, no capability but binding low ports, and as root a root with only /etc and /run', async () => {
    await inRunningSandbox({ kind: 'slirp4netns', path: slirp! }, async ({ helper }) => {
      const status = () => fs.readFileSync(`/proc/${helper}/status`, 'utf8');
      // It filters its syscalls once the tap device is set up: the program's first line may come before.
      await until(() => /^Seccomp:\s+2$/m.test(status()), 'the helper filters its syscalls');
      const effective = BigInt(`0x${/^CapEff:\s+([0-9a-f]+)$/m.exec(status())![1]}`);
      const NET_BIND_SERVICE = 1n << 10n;
      expect(effective & ~NET_BIND_SERVICE).toBe(0n);
      // Not even the (hidden) state dir with its decoy: nothing of the host but /etc and /run.
      // Not root, it runs without --enable-sandbox (see network.ts): it sees the host's root, as the server's uid.
      if (process.getuid?.() === 0) expect(fs.readdirSync(`/proc/${helper}/root`).sort()).toEqual(['etc', 'run']);
      else expect(fs.statSync(`/proc/${helper}`).uid).toBe(process.getuid?.());
    });
  }, 60_000);
});

describe.skipIf(Boolean(skipReason))('a sandbox\'s start', () => {
  it('runs no helper program between its own (no temporary FIFO: mktemp, mkfifo, rm; no `sleep` while waiting) and one bash before bwrap', async () => {
    // Each helper a start could run is shadowed, first on PATH (outside and, bound read-only,
    // inside the sandbox), by a script that notes its name in the workdir, then runs the real one.
    const shims = fs.realpathSync(tempDir());
    const stateDir = tempDir();
    const workdir = fs.realpathSync(tempDir());
    const log = path.join(workdir, 'helpers.log');
    try {
      for (const name of ['mktemp', 'mkfifo', 'rm', 'sleep', 'bash']) {
        const real = findInPath(name, process.env.PATH ?? '')!;
        fs.writeFileSync(path.join(shims, name), `#!/bin/bash\necho ${name} >> "$SHIM_LOG"\nexec ${real} "$@"\n`, { mode: 0o755 });
      }
      // Searchable by the agent's uid (when the server is root), and the log writable by the sandbox's root, which may not override permissions.
      fs.chmodSync(shims, 0o755);
      fs.writeFileSync(log, '');
      fs.chmodSync(log, 0o666);
      // The launcher finds the programs its scripts run on the agent's PATH (absolute entries): the shims.
      const launcher = new BwrapProcessLauncher({ bwrapPath: findInPath('bwrap', process.env.PATH ?? '')!, limits: NO_LIMITS, hiddenPaths: [], extraReadOnlyPaths: [shims], stateDir, searchPath: `${shims}:${process.env.PATH ?? ''}`, networkHelper: selection.networkHelper });
      await launcher.ready({ workdir, network: true });
      const env = { PATH: `${shims}:${process.env.PATH ?? ''}`, HOME: workdir, SHIM_LOG: log };
      for (let i = 0; i < 5; i++) {
        // A one-off command in a network namespace of its own (user-mode network: the side that attaches the helper, the wait for the route).
        const spec = launcher.prepare({ command: 'bash', args: ['-c', 'command -v sleep; awk \'$2 == "00000000" { print "route" }\' /proc/net/route'], cwd: workdir, env, sandbox: { workdir, network: true } });
        const output = execFileSync(spec.command, spec.args, { cwd: spec.cwd, env: spec.env, encoding: 'utf8', timeout: 30_000 });
        // The shims are what the sandbox finds first, and the network is up when the program starts.
        expect(output).toBe(`${path.join(shims, 'sleep')}\nroute\n`);
      }
      // Three bash per start: the launch script (which forks the side that attaches the network
      // helper, then becomes bwrap), the entry script inside, and the program. Nothing else.
      expect(fs.readFileSync(log, 'utf8')).toBe('bash\n'.repeat(3 * 5));
    } finally {
      fs.rmSync(shims, { recursive: true, force: true });
      fs.rmSync(stateDir, { recursive: true, force: true });
      fs.rmSync(workdir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe.skipIf(Boolean(skipReason))('a launch made from a spare process', () => {
  it('runs the program as the launch spawned with its command line does: same environment, directory, descriptors, signals, ids and capabilities', async () => {
    const stateDir = tempDir();
    const workdir = fs.realpathSync(tempDir());
    try {
      const launcher = new BwrapProcessLauncher({ bwrapPath: findInPath('bwrap', process.env.PATH ?? '')!, limits: NO_LIMITS, hiddenPaths: [], stateDir, searchPath: process.env.PATH ?? '', networkHelper: selection.networkHelper });
      await launcher.ready({ workdir, network: true });
      const env = { PATH: process.env.PATH ?? '', HOME: workdir, LANG: 'C.UTF-8', SECRET_VALUE: "it's \"quoted\"\n$HOME `x` \\ é" };
      const show = 'printf "[%s]\\n" "$SECRET_VALUE"; env | sort; pwd; ls /proc/self/fd | wc -l; grep -E "^(Uid|Gid|Groups|Sig(Ign|Blk)|Cap|NoNewPrivs|Seccomp)" /proc/self/status; awk \'$2 == "00000000" { print "route" }\' /proc/net/route';
      const run = (command: string, args: string[], options: { cwd: string; env: Record<string, string>; script?: string }) =>
        new Promise<string>((resolve, reject) => {
          const child = spawn(command, args, { cwd: options.cwd, env: options.env, detached: true, stdio: ['pipe', 'pipe', 'pipe', 'pipe', 'pipe', ...(options.script === undefined ? [] : ['pipe' as const])] });
          let out = '';
          child.stdout!.setEncoding('utf8').on('data', (text: string) => (out += text));
          child.stderr!.setEncoding('utf8').on('data', (text: string) => (out += `stderr: ${text}`));
          if (options.script !== undefined) (child.stdio as unknown as NodeJS.WritableStream[])[5]!.end(options.script);
          child.once('error', reject).once('close', () => resolve(out));
        });
      for (const network of [true, false] as const) {
        const spec = launcher.prepare({ command: 'bash', args: ['-c', show], cwd: workdir, env, sandbox: { workdir, network } });
        expect(spec.spare).toBeDefined();
        const spawned = await run(spec.command, spec.args, spec);
        const fromSpare = await run(spec.spare!.command, spec.spare!.args, { cwd: '/', env: {}, script: spec.spare!.script });
        expect(spawned.startsWith(`[${env.SECRET_VALUE}]\n`)).toBe(true);
        expect(spawned).toContain(`\n${workdir}\n`);
        expect(fromSpare).toBe(spawned);
        // The spare's own command line holds neither the environment nor bwrap's.
        expect(spec.spare!.args.join(' ')).not.toContain('SECRET_VALUE');
        expect(spec.spare!.args.join(' ')).not.toContain(workdir);
      }
      // An environment bash would take for its own (here IFS) is not exported into a launch: no spare then.
      expect(launcher.prepare({ command: 'true', args: [], cwd: workdir, env: { ...env, IFS: ':' }, sandbox: { workdir, network: true } }).spare).toBeUndefined();
    } finally {
      fs.rmSync(stateDir, { recursive: true, force: true });
      fs.rmSync(workdir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe.skipIf(Boolean(skipReason))("a shell's start", () => {
  it('overlaps the network coming up: bash starts before the helper has attached, and its first command has the network', async () => {
    // The helper (pasta) is a script that waits 300 ms before it starts the real one; bash is a
    // script that notes when it starts. Both note the time in one log (CLOCK_REALTIME, µs).
    const shims = fs.realpathSync(tempDir());
    const stateDir = tempDir();
    const workdir = fs.realpathSync(tempDir());
    const log = path.join(workdir, 'start.log');
    const shells: Array<{ close(): Promise<void> }> = [];
    try {
      const helper = selection.networkHelper!;
      fs.writeFileSync(path.join(shims, 'helper'), `#!${findInPath('bash', process.env.PATH ?? '')}\nsleep 0.3\necho "helper $EPOCHREALTIME" >> ${log}\nexec ${helper.path} "$@"\n`, { mode: 0o755 });
      fs.writeFileSync(path.join(shims, 'bash'), `#!${findInPath('bash', process.env.PATH ?? '')}\necho "bash $EPOCHREALTIME" >> ${log}\nexec ${findInPath('bash', process.env.PATH ?? '')} "$@"\n`, { mode: 0o755 });
      fs.chmodSync(shims, 0o755);
      fs.writeFileSync(log, '');
      fs.chmodSync(log, 0o666);
      const launcher = new BwrapProcessLauncher({ bwrapPath: findInPath('bwrap', process.env.PATH ?? '')!, limits: NO_LIMITS, hiddenPaths: [], extraReadOnlyPaths: [shims], stateDir, searchPath: process.env.PATH ?? '', networkHelper: { ...helper, path: path.join(shims, 'helper') } });
      const factory = new BashShellFactory({ launcher, bashPath: path.join(shims, 'bash'), hostEnv: { PATH: process.env.PATH ?? '' } });
      for (let i = 0; i < 3; i++) {
        fs.writeFileSync(log, '');
        const shell = await factory.create({ conversationId: `c${i}`, workdir, env: {} });
        shells.push(shell);
        const result = await shell.run(`awk '$2 == "00000000" { print "route" }' /proc/net/route`, { timeoutMs: 10_000, idleTimeoutMs: 10_000 });
        expect(result.output).toBe('route\n');
        const times = Object.fromEntries(fs.readFileSync(log, 'utf8').trim().split('\n').map((line) => line.split(' ')).map(([name, time]) => [name, Number(time)]));
        expect(times.bash).toBeLessThan(times.helper);
      }
    } finally {
      for (const shell of shells) await shell.close();
      fs.rmSync(shims, { recursive: true, force: true });
      fs.rmSync(stateDir, { recursive: true, force: true });
      fs.rmSync(workdir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe.skipIf(Boolean(skipReason)).each(installedHelpers)('a running user-mode sandbox through $kind', (networkHelper) => {
  it("holds what the launch opened for bwrap (the copied /etc files, the seccomp program) in bwrap's hands only: not in its monitor's, not in the helper's or its side's", async () => {
    await inRunningSandbox(networkHelper, ({ spawned, side, helper }) => {
      const opened = (pid: number) => fs.readdirSync(`/proc/${pid}/fd`).map((fd) => {
        try {
          return fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
        } catch {
          return '';
        }
      });
      for (const pid of [spawned, side, helper]) {
        expect(opened(pid).filter((target) => target.startsWith('/etc/') || target.endsWith('.bpf'))).toEqual([]);
      }
    });
  }, 60_000);

  it('is started by bwrap itself, not by a bash that stays beside it: the side that attached slirp4netns became it; pasta stays its side\'s child', async () => {
    await inRunningSandbox(networkHelper, ({ spawned, side, helper }) => {
      const named = (pid: number) => fs.readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      // The launch's bash used to stay as the wrapper that waited for bwrap: one more bash beside every networked sandbox.
      expect(named(spawned)).toBe('bwrap');
      expect(side === helper).toBe(networkHelper.kind === 'slirp4netns');
    });
  }, 60_000);

  it("goes with the sandbox when only bwrap's monitor is killed (as a shell is ended): the end of the sandbox's sync pipe, or a parent-death signal", async () => {
    await inRunningSandbox(networkHelper, async ({ spawned, side, helper }) => {
      // The sandbox's init goes with the monitor (--die-with-parent); its sync pipe's end reaches the helper's side.
      process.kill(spawned, 'SIGKILL');
      await until(() => !alive(side) && !alive(helper), 'the helper and its side are gone', 5_000);
    });
  }, 60_000);
});

describe.skipIf(Boolean(skipReason))('a network helper that cannot attach', () => {
  // The probe runs one sandbox with the helper attached; only when it fails does it run one without.
  // The helper here exits at once.
  it.each([
    { kind: 'slirp4netns', choice: 'auto' },
    { kind: 'pasta', choice: 'pasta' },
  ] as const)('leaves the sandbox in use, without network, with the reason ($kind, AGENTD_SANDBOX_NETWORK_HELPER=$choice)', async ({ kind, choice }) => {
    const helpers = tempDir();
    const stateDir = tempDir();
    try {
      fs.writeFileSync(path.join(helpers, kind), '#!/bin/sh\nexit 1\n', { mode: 0o755 });
      const broken = await selectProcessLauncher({ requested: 'auto', limits: NO_LIMITS, searchPath: `${helpers}:${process.env.PATH ?? ''}`, hiddenPaths: [], extraReadOnlyPaths: [], stateDir, networkHelper: choice });
      expect(broken.launcher.mode).toBe('bwrap');
      expect(broken.fallbackReason).toBeNull();
      expect(broken.networkHelper).toBeNull();
      expect(broken.networkFallbackReason).toMatch(new RegExp(`^${kind} cannot attach to a sandbox here: the probe `));
      // The helper's side saw the helper end and let the sandbox go on at once (it used to wait out its 10 s, and start-up with it).
      expect(broken.networkFallbackReason).toContain('the sandbox network helper ended before the network came up');
    } finally {
      fs.rmSync(helpers, { recursive: true, force: true });
      fs.rmSync(stateDir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe.skipIf(Boolean(skipReason))('sandbox network helper lifetime', () => {
  it('a "host" conversation loses the host network when the operator withdraws the opt-in', async () => {
    const dataDir = tempDir();
    const listener = await listen('127.0.0.1');
    const probe = reachScript([{ host: '127.0.0.1', port: listener.port }]);
    try {
      let server = await startServer({ dataDir, env: { AGENTD_SANDBOX: 'bwrap', AGENTD_SANDBOX_NETWORK_HOST: 'true' } });
      const id = (await server.services.conversations.create({ max_iterations_per_run: 1, confirmation_mode: false, sandbox: { network: 'host' } })).conversation.id;
      expect((await server.services.commands.run(id, { command: probe, timeout_s: 30 })).stdout).toContain('connected');
      await server.close();
      server = await startServer({ dataDir, env: { AGENTD_SANDBOX: 'bwrap' } });
      try {
        expect((await server.services.commands.run(id, { command: probe, timeout_s: 30 })).stdout).toContain('refused');
      } finally {
        await server.close();
      }
    } finally {
      listener.server.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);

  it.each(installedHelpers)('a server killed with -9 leaves no network helper ($kind) and no sandbox behind', async (networkHelper) => {
    const dataDir = tempDir();
    const server = await spawnServer({ dataDir, env: { AGENTD_SANDBOX: 'bwrap', AGENTD_SANDBOX_NETWORK_HELPER: networkHelper.kind } });
    const helperName = path.basename(networkHelper.path);
    try {
      const auth = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };
      const created = await fetch(`${server.url}/conversations`, { method: 'POST', headers: auth, body: '{}' }).then((response) => response.json() as Promise<any>);
      // A long command holds a sandbox (and its helper) open; its response never comes.
      void fetch(`${server.url}/conversations/${created.id}/commands`, { method: 'POST', headers: auth, body: JSON.stringify({ command: 'sleep 60', timeout_s: 120 }) }).catch(() => undefined);
      // The helper, its parent and the sandbox, read together (a process seen in one look at
      // /proc may be gone by the next; the test waits until one look finds all three).
      let found: { helper: number; parent: number; sandbox: number } | undefined;
      await until(() => {
        const helpers = startedBelow(server.child.pid!, helperName);
        const sandboxes = helpersOf(server.child.pid!, 'bwrap');
        if (helpers.length !== 1 || sandboxes.length !== 1) return false;
        try {
          const parent = Number(/^PPid:\s+(\d+)$/m.exec(fs.readFileSync(`/proc/${helpers[0]}/status`, 'utf8'))?.[1]);
          found = { helper: helpers[0]!, parent, sandbox: sandboxes[0]! };
          return true;
        } catch {
          return false;
        }
      }, 'the helper and the sandbox run');
      const { helper, parent, sandbox } = found!;
      server.child.kill('SIGKILL');
      await server.exited;
      await until(() => !alive(helper) && !alive(parent) && !alive(sandbox), 'the helper, its parent and the sandbox are gone');
    } finally {
      server.child.kill('SIGKILL');
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});

/** The uid and gid a root test runs a server as to see what a server that is not root does (the Docker image's runs as `node`). */
const NOBODY = 65534;
const setpriv = findInPath('setpriv', process.env.PATH ?? '');
describe.skipIf(Boolean(skipReason) || process.getuid?.() !== 0 || setpriv === null).each(installedHelpers)('a server that is not root, through $kind', (networkHelper) => {
  it('gives its sandboxes the network, and still no way to the host loopback (bwrap, unprivileged, used to put the program in a user namespace from which no helper could join the network namespace)', async () => {
    const dataDir = tempDir();
    // Its own temp dir, given to the server's user; the directory above it lets others through, not list.
    fs.chownSync(dataDir, NOBODY, NOBODY);
    const listener = await listen('127.0.0.1');
    const server = await spawnServer({ dataDir, command: [setpriv!, `--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', process.execPath, CLI], env: { AGENTD_SANDBOX: 'bwrap', AGENTD_SANDBOX_NETWORK_HELPER: networkHelper.kind, HOME: dataDir } });
    try {
      const headers = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };
      const info = (await (await fetch(`${server.url}/info`, { headers })).json()) as any;
      expect(info.sandbox.mode).toBe('bwrap');
      // Start-up's probe ran a sandbox with the helper attached and found its default route.
      expect(info.sandbox.network).toMatchObject({ default: true, user_mode: networkHelper.kind, note: null });
      const created = (await (await fetch(`${server.url}/conversations`, { method: 'POST', headers, body: '{}' })).json()) as any;
      // The agent is the server's user, with a terminal device of its own (devpts, which made bwrap nest user namespaces).
      const command = `id -u; test -c /dev/ptmx && echo ptmx; awk '$2 == "00000000" { print "default via " $1 }' /proc/net/route\n${reachScript([{ host: '127.0.0.1', port: listener.port }])}`;
      const result = (await (await fetch(`${server.url}/conversations/${created.id}/commands`, { method: 'POST', headers, body: JSON.stringify({ command, timeout_s: 60 }) })).json()) as any;
      expect(result.stdout).toMatch(new RegExp(`^${NOBODY}\nptmx\ndefault via \\S+\n127\\.0\\.0\\.1:${listener.port} refused\n$`));
      expect(result.stderr).not.toContain('did not come up');
    } finally {
      listener.server.close();
      server.child.kill('SIGKILL');
      await server.exited;
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }, 90_000);
});

describe('network policy and connection caps', () => {
  it('config: AGENTD_SANDBOX_NETWORK, the host opt-in, the network helper and the connection caps', () => {
    expect(loadConfig({}).sandbox.network).toEqual({ default: true, hostAllowed: false, helper: 'auto' });
    expect(loadConfig({ AGENTD_SANDBOX_NETWORK: 'none' }).sandbox.network).toEqual({ default: false, hostAllowed: false, helper: 'auto' });
    expect(loadConfig({ AGENTD_SANDBOX_NETWORK_HOST: 'true' }).sandbox.network).toEqual({ default: true, hostAllowed: true, helper: 'auto' });
    expect(loadConfig({ AGENTD_SANDBOX_NETWORK_HELPER: 'pasta' }).sandbox.network.helper).toBe('pasta');
    expect(() => loadConfig({ AGENTD_SANDBOX_NETWORK_HELPER: 'vpnkit' })).toThrow(/invalid AGENTD_SANDBOX_NETWORK_HELPER/);
    // A server default of host is the operator's opt-in.
    expect(loadConfig({ AGENTD_SANDBOX_NETWORK: 'host' }).sandbox.network).toEqual({ default: 'host', hostAllowed: true, helper: 'auto' });
    expect(() => loadConfig({ AGENTD_SANDBOX_NETWORK: 'on' })).toThrow(/invalid AGENTD_SANDBOX_NETWORK/);
    expect(loadConfig({}).connections).toEqual({ max: 4096, perClient: 256, headersTimeoutMs: 30_000, keepAliveTimeoutMs: 72_000 });
    expect(loadConfig({ AGENTD_MAX_CONNECTIONS: '0', AGENTD_MAX_CONNECTIONS_PER_CLIENT: '0' }).connections).toMatchObject({ max: 0, perClient: 0 });
    expect(() => loadConfig({ AGENTD_MAX_CONNECTIONS_PER_CLIENT: '-1' })).toThrow(/AGENTD_MAX_CONNECTIONS_PER_CLIENT/);
  });

  it('"host" is refused with 422 unless the operator allows it', async () => {
    const server = await startServer({ listen: false, env: { AGENTD_SANDBOX: 'none' } });
    try {
      const refused = await server.app.inject({ method: 'POST', url: '/conversations', headers: server.auth, payload: { sandbox: { network: 'host' } } });
      expect(refused.statusCode).toBe(422);
      expect(refused.json()).toMatchObject({ error: 'host_network_not_allowed', message: expect.stringContaining('AGENTD_SANDBOX_NETWORK_HOST') });
      const bad = await server.app.inject({ method: 'POST', url: '/conversations', headers: server.auth, payload: { sandbox: { network: 'internet' } } });
      expect(bad.statusCode).toBe(400);
      const plain = await server.app.inject({ method: 'POST', url: '/conversations', headers: server.auth, payload: {} });
      expect(plain.json().sandbox).toEqual({ network: true });
    } finally {
      await server.close();
    }
  });

  it('past AGENTD_MAX_CONNECTIONS in all, a new connection is closed unserved; once some close, new ones are served', async () => {
    const MAX = 20;
    const server = await startServer({ env: { AGENTD_SANDBOX: 'none', AGENTD_MAX_CONNECTIONS: String(MAX), AGENTD_MAX_CONNECTIONS_PER_CLIENT: '0' } });
    const { port } = new URL(server.url);
    const held: net.Socket[] = [];
    const open = (): Promise<net.Socket> =>
      new Promise((resolve, reject) => {
        const socket = net.connect({ host: '127.0.0.1', port: Number(port) }, () => resolve(socket));
        socket.on('error', reject);
      });
    const connections = () => new Promise<number>((resolve) => server.app.server.getConnections((_error, count) => resolve(count)));
    try {
      for (let i = 0; i < MAX; i++) held.push(await open());
      await expect.poll(connections).toBe(MAX);
      // Each connection past the cap is accepted by the kernel and closed by the server, unserved.
      for (let i = 0; i < 5; i++) {
        const extra = await open();
        const answer = await new Promise<string>((resolve) => {
          let data = '';
          extra.on('data', (chunk) => {
            data += chunk.toString();
            if (data.includes('\r\n\r\n')) extra.destroy(); // served: no need to wait for the close
          });
          extra.on('close', () => resolve(data));
          extra.on('error', () => undefined);
          extra.write('GET /alive HTTP/1.1\r\nHost: x\r\n\r\n');
        });
        expect(answer).toBe('');
      }
      expect(await connections()).toBe(MAX);
      for (const socket of held.splice(0, 5)) socket.destroy();
      await expect.poll(connections).toBe(MAX - 5);
      expect((await fetch(`${server.url}/alive`)).status).toBe(200);
      const info = await server.app.inject({ method: 'GET', url: '/info', headers: server.auth });
      expect(info.json().limits).toMatchObject({ max_connections: MAX, max_connections_per_client: null });
    } finally {
      for (const socket of held) socket.destroy();
      await server.close();
    }
  }, 60_000);

  it('a client holding hundreds of connections is refused past its cap while another client still gets /alive', async () => {
    const PER_CLIENT = 50;
    const FLOOD = 300;
    const server = await startServer({ env: { AGENTD_SANDBOX: 'none', AGENTD_MAX_CONNECTIONS_PER_CLIENT: String(PER_CLIENT) } });
    const { port } = new URL(server.url);
    const sockets: net.Socket[] = [];
    try {
      // The flood: FLOOD connections from 127.0.0.1, held open without a request. The ones past
      // the cap are answered with a 503 and closed; the test waits for exactly that many.
      let refused = 0;
      let closedOtherwise = 0;
      const allRefused = new Promise<void>((resolve) => {
        for (let i = 0; i < FLOOD; i++) {
          const socket = net.connect({ host: '127.0.0.1', port: Number(port) });
          sockets.push(socket);
          let data = '';
          socket.on('data', (chunk) => (data += chunk.toString()));
          socket.on('error', () => undefined);
          socket.on('close', () => {
            if (data.startsWith('HTTP/1.1 503') && data.includes('"too_many_connections"')) refused += 1;
            else closedOtherwise += 1;
            if (refused === FLOOD - PER_CLIENT) resolve();
          });
        }
      });
      await allRefused;
      expect(closedOtherwise).toBe(0);
      expect(sockets.filter((socket) => !socket.destroyed && !socket.closed)).toHaveLength(PER_CLIENT);
      // Another client, from another loopback address, is served while the flood holds its share.
      const alive = await new Promise<number>((resolve, reject) => {
        const request = http.get({ host: '127.0.0.1', port: Number(port), path: '/alive', localAddress: '127.0.0.2', agent: false }, (response) => {
          response.resume();
          resolve(response.statusCode ?? 0);
        });
        request.on('error', reject);
      });
      expect(alive).toBe(200);
      const { body } = await server.app.inject({ method: 'GET', url: '/info', headers: server.auth }).then((response) => ({ body: response.json() }));
      expect(body.limits).toMatchObject({ max_connections: 4096, max_connections_per_client: PER_CLIENT });
    } finally {
      for (const socket of sockets) socket.destroy();
      await server.close();
    }
  }, 60_000);
});

describe('the network helper found at start-up', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((dir) => fs.rmSync(dir, { recursive: true, force: true })));

  /** A directory of executables by these names (they are never run). */
  function programs(...names: string[]): string {
    const dir = tempDir('agentd-network-helpers-');
    dirs.push(dir);
    for (const name of names) fs.writeFileSync(path.join(dir, name), '#!/bin/sh\nexit 1\n', { mode: 0o755 });
    return dir;
  }

  it('is slirp4netns, else pasta (auto); the one AGENTD_SANDBOX_NETWORK_HELPER names and no other', () => {
    const both = programs('pasta', 'slirp4netns');
    const pastaOnly = programs('pasta');
    const slirpOnly = programs('slirp4netns');
    expect(findNetworkHelper(both, 'auto', false)).toEqual({ kind: 'slirp4netns', path: path.join(both, 'slirp4netns') });
    expect(findNetworkHelper(pastaOnly, 'auto', false)).toEqual({ kind: 'pasta', path: path.join(pastaOnly, 'pasta') });
    // Wherever each is in the search path.
    expect(findNetworkHelper(`${pastaOnly}:${slirpOnly}`, 'auto', false)).toEqual({ kind: 'slirp4netns', path: path.join(slirpOnly, 'slirp4netns') });
    expect(findNetworkHelper(both, 'pasta', false)).toEqual({ kind: 'pasta', path: path.join(both, 'pasta') });
    expect(findNetworkHelper(both, 'slirp4netns', false)).toEqual({ kind: 'slirp4netns', path: path.join(both, 'slirp4netns') });
    expect(findNetworkHelper(slirpOnly, 'pasta', false)).toBeNull();
    expect(findNetworkHelper(pastaOnly, 'slirp4netns', false)).toBeNull();
    expect(findNetworkHelper(programs(), 'auto', false)).toBeNull();
    // What start-up then says (network: true gets no network).
    expect(noNetworkHelper('auto')).toBe('neither slirp4netns nor pasta (package passt) is installed');
    expect(noNetworkHelper('pasta')).toBe('AGENTD_SANDBOX_NETWORK_HELPER=pasta, but pasta (package passt) is not installed');
  });

  it("is passt's AVX2 build when the CPU has AVX2 and the package ships it beside pasta (pasta would exec it first thing), else pasta itself", () => {
    const both = programs('pasta', 'pasta.avx2', 'slirp4netns');
    expect(findNetworkHelper(both, 'pasta', true)).toEqual({ kind: 'pasta', path: path.join(both, 'pasta.avx2') });
    expect(findNetworkHelper(both, 'pasta', false)).toEqual({ kind: 'pasta', path: path.join(both, 'pasta') });
    const plain = programs('pasta');
    expect(findNetworkHelper(plain, 'auto', true)).toEqual({ kind: 'pasta', path: path.join(plain, 'pasta') });
    // Only beside the pasta found first in the search path.
    expect(findNetworkHelper(`${plain}:${both}`, 'pasta', true)).toEqual({ kind: 'pasta', path: path.join(plain, 'pasta') });
    const slirp = programs('slirp4netns', 'slirp4netns.avx2');
    expect(findNetworkHelper(slirp, 'auto', true)).toEqual({ kind: 'slirp4netns', path: path.join(slirp, 'slirp4netns') });
  });
});
