import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { NO_LIMITS } from '../../src/adapters/sandbox/resource-limits.js';
import { detectSandboxCgroups } from '../../src/adapters/sandbox/cgroups.js';
import { sandboxUid } from '../../src/adapters/sandbox/identity.js';
import { selectProcessLauncher } from '../../src/adapters/sandbox/select-process-launcher.js';
import { isSystemPath } from '../../src/adapters/sandbox/workdir-owner.js';
import { copiedFileRedirections, findInPath } from '../../src/adapters/sandbox/mounts.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { tempDir } from '../support/agentd.js';
import { idmapRefusal } from '../support/idmap.js';

/**
 * What a hostile agent tries against its own sandbox, through the real server: planting a set-id
 * file for the host's users (capabilities, root-owned files, chmod u+s), filling memory past the
 * sandbox's limit with several processes, filling the root, /dev, /tmp and the workdir. Every
 * target is inside this test's temp dirs (the workdirs live in the test's data dir).
 */
const probeDir = tempDir('agentd-confinement-probe-');
const { fallbackReason } = await selectProcessLauncher({ requested: 'auto', limits: NO_LIMITS, searchPath: process.env.PATH ?? '', hiddenPaths: [], extraReadOnlyPaths: [], stateDir: probeDir });
fs.rmSync(probeDir, { recursive: true, force: true });
const asRoot = process.getuid?.() === 0;
/** Whether a workdir the client brings is id-mapped here (src/adapters/sandbox/workdir-idmap.ts), its owner shown as the agent's uid. */
const idmapped = asRoot && fallbackReason === null && (await idmapRefusal()) === null;
if (fallbackReason) console.warn(`test/sandbox/sandbox-confinement.test.ts skipped: bubblewrap cannot run here (${fallbackReason})`);
else if (!asRoot) console.warn('sandbox-confinement: the capability and workdir-ownership tests skipped: they need a server running as root');

const MEMORY_MB = 200;
const PROCESSES = 128;
const { cgroups, reason: noCgroup } = detectSandboxCgroups({ limits: { memoryBytes: MEMORY_MB * 1024 * 1024, pids: PROCESSES } });
if (!fallbackReason && !cgroups) console.warn(`sandbox-confinement: whole-sandbox memory test skipped: no cgroup can be created here (${noCgroup})`);

const ENV = {
  AGENTD_SANDBOX: 'bwrap',
  AGENTD_LIMIT_MEMORY_MB: String(MEMORY_MB),
  AGENTD_LIMIT_PROCESSES: String(PROCESSES),
  AGENTD_LIMIT_CPU_S: '60',
  AGENTD_LIMIT_TMP_MB: '20',
  AGENTD_LIMIT_FILE_MB: '30',
  AGENTD_LIMIT_WORKDIR_MB: '50',
};

const bash = (command: string, extra: Record<string, unknown> = {}) => ({ toolCalls: [{ name: 'bash', arguments: { command, ...extra } }] });
const observations = (events: any[]) => events.filter((event) => event.kind === 'observation');

/** Every file under `dir` with a set-uid or set-gid bit (never following symlinks). */
function setIdFiles(dir: string): string[] {
  const found: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    const file = path.join(entry.parentPath, entry.name);
    const stat = fs.lstatSync(file);
    if (!stat.isSymbolicLink() && (stat.mode & 0o6000) !== 0) found.push(file);
  }
  return found;
}

/** Open descriptors, in any process, to files of `dir` that were deleted. */
function deletedFilesHeld(dir: string): number {
  let held = 0;
  for (const pid of fs.readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    let fds: string[];
    try {
      fds = fs.readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue; // gone meanwhile
    }
    for (const fd of fds) {
      try {
        const target = fs.readlinkSync(`/proc/${pid}/fd/${fd}`);
        if (target.startsWith(`${dir}/`) && target.endsWith(' (deleted)')) held++;
      } catch {
        // closed meanwhile
      }
    }
  }
  return held;
}

/** Runs as the agent would write it: every line reports what it managed to do with an _OK word. */
const SET_ID_ATTACK = [
  'cp "$(command -v id)" ./myid',
  'chmod u+s ./myid && echo SUID_OK',
  'chmod 4755 ./myid && echo CHMOD_4755_OK',
  'chmod g+s ./myid && echo SGID_OK',
  'install -m 4755 ./myid ./installed && echo INSTALL_OK',
  'perl -MFcntl -e \'sysopen(my $f, "created-suid", O_CREAT|O_WRONLY, 04755) or exit 1\' && [ -u created-suid ] && echo CREATE_SUID_OK',
  'cat ./myid > ./decoy-bin && echo OVERWRITE_BIN_OK',
  'echo pwned > ./decoy-root && echo OVERWRITE_OK',
  'chmod 4755 ./decoy-bin && echo CHMOD_ROOT_OK',
  'chown "$(id -u)" ./decoy-root && echo CHOWN_OK',
  'echo pwned > ../outside-decoy && echo OUTSIDE_OK',
  'ls -l /proc/self/fd/ | grep -q seccomp && echo SECCOMP_FD_LEAK_OK',
  'grep -E "^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):" /proc/self/status',
  'awk -v d="$PWD" \'$5 == d { print "workdir mount: " $6 }\' /proc/self/mountinfo',
  'echo "found: $(find . -perm /6000 | tr "\\n" " ")"',
].join('\n');

describe.skipIf(fallbackReason !== null)('sandbox confinement', () => {
  let harness: AgentHarness;

  beforeAll(async () => {
    harness = await startAgentHarness([], { env: ENV });
  });

  // A test that failed midway leaves turns of its own unanswered: the next test starts on an empty script.
  beforeEach(() => harness?.llm.setScript([]));

  afterAll(async () => {
    await harness?.close();
    // The workdirs (with the files the attacks wrote) live in the data dir.
    if (harness) fs.rmSync(harness.server.dataDir, { recursive: true, force: true });
  });

  /** The agent runs `command` in its bash tool (time limit `timeoutS`), then answers: the bash call's observation and the workdir, once the run is over. */
  async function agentRuns(command: string, timeoutS: number, message: string): Promise<{ stopped: any; workdir: string }> {
    harness.llm.push(bash(command, { timeout_s: timeoutS }), { text: 'done' });
    const id = await harness.createConversation({ initial_message: message });
    // Longer than the command's own timeout: a guard that never fires shows as a timed-out observation.
    await harness.waitForStatus(id, ['idle', 'error'], (timeoutS + 30) * 1000);
    const [stopped] = observations(await harness.events(id));
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    return { stopped, workdir };
  }

  it("an agent's ~/.bashrc (its workdir) runs in none of the sandbox's own scripts: not the launch on the host, not the entry as the sandbox's root", async () => {
    // The agent plants a .bashrc (HOME is its workdir) that notes which bash ran it, as whom and
    // with which capabilities, in a file it made writable for all. Any script of the sandbox's that
    // ran it would be a way out: the launch runs on the host as the server's user (root here), the
    // entry as the sandbox's root with the capabilities it keeps to switch uids.
    const plant = [
      'printf \'%s\\n\' \'echo "$0 $(id -u) $(grep CapEff /proc/self/status | cut -f2)" >> "$HOME/ran-bashrc"\' > "$HOME/.bashrc"',
      ': > "$HOME/ran-bashrc"; chmod 666 "$HOME/ran-bashrc"',
    ].join('\n');
    harness.llm.push(bash(plant), { text: 'planted' });
    const id = await harness.createConversation({ initial_message: 'plant it' });
    await harness.waitForStatus(id, ['idle', 'error'], 30_000);
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    expect(fs.readFileSync(path.join(workdir, '.bashrc'), 'utf8')).toContain('ran-bashrc');
    // New sandboxes: a one-off command, and the agent's shell started again after an `exit`.
    expect((await harness.post(`/conversations/${id}/commands`, { command: 'true', timeout_s: 30 })).body.exit_code).toBe(0);
    harness.llm.push(bash('exit'), bash('true'), { text: 'again' });
    expect((await harness.post(`/conversations/${id}/messages`, { content: 'restart', run: true })).status).toBe(202);
    await harness.waitForStatus(id, ['idle', 'error'], 30_000);
    // The plant works: an interactive bash of the agent's own reads it, as the agent.
    await harness.post(`/conversations/${id}/commands`, { command: 'bash -i -c true </dev/null >/dev/null 2>&1', timeout_s: 30 });
    const lines = fs.readFileSync(path.join(workdir, 'ran-bashrc'), 'utf8').trim().split('\n').filter(Boolean);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.filter((line) => line.startsWith('agentd-'))).toEqual([]);
    for (const line of lines) expect(line).toMatch(/ 0000000000000000$/);
  });

  it("programs the agent puts on a relative entry of its PATH (node_modules/.bin) run as the agent only, never as the sandbox's machinery", async () => {
    // An operator lets the agent run its project's tools: AGENTD_AGENT_PATH starts with
    // node_modules/.bin. The sandbox's scripts start with the workdir as their current directory;
    // had they looked their programs up by name, the agent's own would have run as root.
    const own = await startAgentHarness([], { env: { ...ENV, AGENTD_AGENT_PATH: `node_modules/.bin:${process.env.PATH ?? '/usr/bin:/bin'}` } });
    try {
      const names = ['bash', 'env', 'setpriv', 'mkdir', 'sleep'];
      const plant = [
        'mkdir -p node_modules/.bin; : > ran-shim; chmod 666 ran-shim',
        ...names.map((name) => `printf '#!/bin/sh\\necho "${name} $(id -u) $(grep CapEff /proc/self/status | cut -f2)" >> "%s/ran-shim"\\nexec ${findInPath(name, '/usr/bin:/bin')} "$@"\\n' "$PWD" > node_modules/.bin/${name}; chmod 755 node_modules/.bin/${name}`),
      ].join('\n');
      own.llm.push(bash(plant), { text: 'planted' });
      const id = await own.createConversation({ initial_message: 'plant them' });
      await own.waitForStatus(id, ['idle', 'error'], 30_000);
      const workdir = (await own.get(`/conversations/${id}`)).body.workdir as string;
      expect(fs.readdirSync(path.join(workdir, 'node_modules', '.bin')).sort()).toEqual([...names].sort());
      // New sandboxes: a one-off command, and the agent's shell started again after an `exit`.
      expect((await own.post(`/conversations/${id}/commands`, { command: 'true', timeout_s: 30 })).body.exit_code).toBe(0);
      own.llm.push(bash('exit'), bash('true'), { text: 'again' });
      expect((await own.post(`/conversations/${id}/messages`, { content: 'restart', run: true })).status).toBe(202);
      await own.waitForStatus(id, ['idle', 'error'], 30_000);
      const lines = fs.readFileSync(path.join(workdir, 'ran-shim'), 'utf8').trim().split('\n').filter(Boolean);
      // The agent's own programs do come from there (its shell, as itself) ...
      expect(lines.length).toBeGreaterThan(0);
      // ... and nothing of the sandbox's: no line as root, none with a capability.
      for (const line of lines) expect(line).toMatch(/^\w+ [1-9]\d* 0000000000000000$/);
    } finally {
      await own.close();
      fs.rmSync(own.server.dataDir, { recursive: true, force: true });
    }
  });

  it('/info says which limits are in force and what enforces each', async () => {
    const { body } = await harness.get('/info');
    const wholeSandbox = cgroups ? 'cgroup' : 'rlimit';
    expect(body.sandbox.limits).toEqual({
      cpu_s: { value: 60, enforced_by: 'rlimit' },
      memory_mb: { value: MEMORY_MB, enforced_by: wholeSandbox },
      processes: { value: PROCESSES, enforced_by: wholeSandbox },
      file_mb: { value: 30, enforced_by: 'rlimit' },
      tmp_mb: { value: 20, enforced_by: 'tmpfs' },
      workdir_mb: { value: 50, enforced_by: 'server' },
    });
  });

  it("cannot reach the server's spawner: a spawn request written to every descriptor the agent holds is not obeyed", async () => {
    // The spawner (process-spawner.ts) spawns unsandboxed whatever its channel asks for. The agent
    // must hold no descriptor of it: this writes the very message the server sends to every
    // descriptor the shell has, asking for a file outside the sandbox (a decoy in the data dir).
    const decoy = path.join(harness.server.dataDir, `spawner-decoy-${crypto.randomUUID()}`);
    const request = JSON.stringify({ t: 'spawn', id: 4242, command: '/usr/bin/touch', args: [decoy], cwd: '/', env: {}, detached: true, stdio: ['ignore', 'ignore', 'ignore'] });
    const attack = [
      `msg='${request}'`,
      // A descriptor whose reader is gone must not end the attack (SIGPIPE): each write is tried in a subshell.
      "trap '' PIPE",
      // Its own descriptors, then every one it can open of every process it can see (pipes open; sockets do not).
      'for fd in /proc/self/fd/*; do n=${fd##*/}; (printf "%s\\n" "$msg" >&"$n") 2>/dev/null && echo "WROTE $n"; done',
      'for f in /proc/[0-9]*/fd/*; do (printf "%s\\n" "$msg" >"$f") 2>/dev/null && echo "WROTE $f"; done',
      'echo ATTACK_DONE',
    ].join('\n');
    harness.llm.push(bash(attack), { text: 'done' });
    const id = await harness.createConversation({ initial_message: 'reach the spawner' });
    await harness.waitForStatus(id, ['idle', 'error'], 30_000);
    const output = observations(await harness.events(id))[0].content as string;
    expect(output).toContain('ATTACK_DONE');
    expect(output).toMatch(/^WROTE (?:[3-9]|\d{2,})$/m); // it did write to descriptors beyond stdio
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(fs.existsSync(decoy)).toBe(false);
  });

  it.skipIf(!asRoot)('the agent holds no capability and cannot plant a set-id file or touch root-owned files', async () => {
    // First run: the shell starts, the sandbox is prepared and the workdir given to the agent.
    harness.llm.push(bash('id -u'), { text: 'ready' });
    const id = await harness.createConversation({ initial_message: 'start' });
    await harness.waitForStatus(id, ['idle', 'error'], 30_000);
    const uid = Number(observations(await harness.events(id))[0].content.trim().split('\n')[0]);
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;

    // Files a root server writes later (file_editor, uploads, ...) and one beside the workdir.
    const decoyRoot = path.join(workdir, 'decoy-root');
    const decoyBin = path.join(workdir, 'decoy-bin');
    const outside = path.join(path.dirname(workdir), 'outside-decoy');
    fs.writeFileSync(decoyRoot, 'root decoy\n', { mode: 0o644 });
    fs.writeFileSync(decoyBin, '#!/bin/sh\necho decoy\n', { mode: 0o755 });
    fs.writeFileSync(outside, 'outside decoy\n', { mode: 0o644 });

    harness.llm.push(bash(SET_ID_ATTACK), { text: 'done' });
    await harness.post(`/conversations/${id}/messages`, { content: 'plant a setuid binary' });
    await harness.waitForStatus(id, ['idle', 'error'], 30_000);
    const output = observations(await harness.events(id))[1].content as string;

    expect(output).not.toMatch(/_OK\b/);
    for (const set of ['CapInh', 'CapPrm', 'CapEff', 'CapBnd', 'CapAmb']) expect(output).toMatch(new RegExp(`^${set}:\\s+0000000000000000$`, 'm'));
    expect(output).toMatch(/^NoNewPrivs:\s+1$/m);
    expect(output).toMatch(/^Seccomp:\s+2$/m);
    expect(output).toMatch(/^workdir mount: rw,nosuid,nodev\b/m);
    expect(output).toMatch(/^found: $/m);
    // On the host: the copy exists (normal work) but nothing has a set-id bit; root's files are untouched.
    expect(fs.existsSync(path.join(workdir, 'myid'))).toBe(true);
    expect(setIdFiles(workdir)).toEqual([]);
    expect(fs.readFileSync(decoyRoot, 'utf8')).toBe('root decoy\n');
    expect(fs.statSync(decoyRoot)).toMatchObject({ uid: 0, mode: 0o100644 });
    expect(fs.readFileSync(decoyBin, 'utf8')).toBe('#!/bin/sh\necho decoy\n');
    expect(fs.statSync(decoyBin)).toMatchObject({ uid: 0, mode: 0o100755 });
    expect(fs.readFileSync(outside, 'utf8')).toBe('outside decoy\n');
    // The agent works as the owner of its workdir.
    expect(uid).toBe(sandboxUid(workdir));
    expect(fs.statSync(workdir).uid).toBe(uid);
  });

  it.skipIf(!asRoot)("normal work still works: files, git; a client-given workdir stays its owner's, the agent working there as a uid of its own (id-mapped) or as the owner", async () => {
    const existing = fs.realpathSync(tempDir('agentd-confinement-project-'));
    fs.mkdirSync(path.join(existing, 'src', 'deep'), { recursive: true });
    fs.writeFileSync(path.join(existing, 'src', 'deep', 'old.txt'), 'old\n', { mode: 0o644 });
    fs.writeFileSync(path.join(existing, 'tool'), '#!/bin/sh\n', { mode: 0o755 });
    fs.symlinkSync('/nonexistent-agentd-target', path.join(existing, 'dangling'));
    // The user's project, owned by the user (a uid of the test's choosing, inside its temp dir).
    const owner = 23_457;
    execFileSync('chown', ['-R', '-h', `${owner}:${owner}`, existing]);
    fs.chmodSync(path.join(existing, 'tool'), 0o4755);
    try {
      const { body } = await harness.post('/conversations', { workdir: existing });
      const script = [
        'set -e',
        'echo new > new.txt && sed -i s/new/edited/ new.txt && cat new.txt',
        'echo more >> src/deep/old.txt && cat src/deep/old.txt',
        'rm tool && mkdir -p gone/x && rm -r gone',
        // The seccomp filter looks at the mode only when a file is created: opening one is not refused.
        'perl -MFcntl -e \'sysopen(my $f, "new.txt", O_RDONLY, 04755) or die "open: $!"\'',
        'chmod 700 new.txt && chmod 644 new.txt && touch -d 2001-01-01 new.txt',
        'git init -q repo && cd repo && echo hi > f && git add f',
        'git -c user.name=agent -c user.email=agent@example.invalid commit -qm first && git log --format=%s',
        'echo ALL_DONE',
      ].join('\n');
      const result = await harness.post(`/conversations/${body.id}/commands`, { command: script, timeout_s: 60 });
      expect(result.body.stderr).toBe('');
      expect(result.body.stdout).toBe('edited\nold\nmore\nfirst\nALL_DONE\n');
      expect((await harness.post(`/conversations/${body.id}/commands`, { command: 'id -u', timeout_s: 30 })).body.stdout).toBe(`${idmapped ? sandboxUid(existing) : owner}\n`);
      for (const file of ['.', 'src/deep', 'src/deep/old.txt', 'new.txt', 'repo/.git/HEAD']) expect(fs.statSync(path.join(existing, file)).uid, file).toBe(owner);
      expect(fs.lstatSync(path.join(existing, 'dangling')).uid).toBe(owner);
      expect(setIdFiles(existing)).toEqual([]);
    } finally {
      fs.rmSync(existing, { recursive: true, force: true });
    }
  });

  it.skipIf(!asRoot)("forgets a deleted conversation's workdir: neither its ownership nor its uid's identity files stay", async () => {
    const launcher = (harness.server.services.commands as unknown as { deps: { runner: { options: { launcher: { held: { owned: number; identityFiles: number } } } } } }).deps.runner.options.launcher;
    const before = launcher.held;
    const { body } = await harness.post('/conversations', {});
    const uid = sandboxUid(body.workdir);
    const result = await harness.post(`/conversations/${body.id}/commands`, { command: 'id -u', timeout_s: 30 });
    expect(result.body.stdout.trim()).toBe(String(uid));
    const identityFiles = [`passwd-${uid}`, `group-${uid}`].map((name) => path.join(harness.server.dataDir, 'sandbox', name));
    expect(identityFiles.every((file) => fs.existsSync(file))).toBe(true);
    expect(launcher.held).toEqual({ owned: before.owned + 1, identityFiles: before.identityFiles + 2 });

    const response = await fetch(`${harness.server.url}/conversations/${body.id}`, { method: 'DELETE', headers: harness.server.auth });
    expect(response.status).toBe(204);
    expect(launcher.held).toEqual(before);
    expect(identityFiles.filter((file) => fs.existsSync(file))).toEqual([]);
  });

  it('the root and /dev are read-only; /tmp, /var/tmp and /dev/shm are sized; a file past RLIMIT_FSIZE fails', async () => {
    const { body } = await harness.post('/conversations', {});
    const script = [
      `probe=agentd-test-probe-${crypto.randomUUID()}`,
      'echo x > /$probe || echo ROOT_REFUSED',
      'mkdir /$probe-dir || echo MKDIR_REFUSED',
      'echo x > /dev/$probe || echo DEV_REFUSED',
      // A name no file of the host has: even a sandbox that wrongly shared the host's /tmp could
      // only ever remove what this script wrote.
      `fill=agentd-test-fill-${crypto.randomUUID()}`,
      'for d in /tmp /var/tmp /dev/shm; do head -c 25M /dev/zero > $d/$fill || echo "$d FULL $(( $(stat -c %s $d/$fill) / 1048576 ))"; rm -f $d/$fill; done',
      'head -c 40M /dev/zero > big; echo "fsize exit $? size $(( $(stat -c %s big) / 1048576 ))"',
    ].join('\n');
    const result = await harness.post(`/conversations/${body.id}/commands`, { command: script, timeout_s: 60 });
    const out = result.body.stdout as string;
    expect(out).toContain('ROOT_REFUSED');
    expect(out).toContain('MKDIR_REFUSED');
    expect(out).toContain('DEV_REFUSED');
    expect(result.body.stderr).toMatch(/Read-only file system/);
    for (const dir of ['/tmp', '/var/tmp', '/dev/shm']) expect(out).toMatch(new RegExp(`^${dir} FULL (19|20)$`, 'm'));
    expect(result.body.stderr).toMatch(/No space left on device/);
    expect(out).toMatch(/^fsize exit 153 size 30$/m);
    expect(result.body.stderr).toMatch(/File size limit exceeded/);
  });

  it("the allowlist's /etc files are copies as the host has them (content, mode), read-only, with no descriptor left; its directories are bound", async () => {
    const { body } = await harness.post('/conversations', {});
    const files = ['/etc/hosts', '/etc/resolv.conf', '/etc/nsswitch.conf', '/etc/ld.so.cache'].filter((file) => fs.existsSync(file));
    expect(files.length).toBeGreaterThan(0);
    const script = [
      ...files.map((file) => `echo "${file} $(stat -c %a ${file}) $(md5sum < ${file} | cut -c1-32) $(grep -c " ${file} " /proc/self/mountinfo)"`),
      `echo "/etc/ssl mounts $(grep -c ' /etc/ssl ' /proc/self/mountinfo)"`,
      `echo x >> ${files[0]} || echo APPEND_REFUSED`,
      // The copies' descriptors (20 and up in the launch) are bwrap's to read and close: none reaches the program.
      'echo "fds $(ls /proc/self/fd | sort -n | tr "\\n" " ")"',
    ].join('\n');
    const result = await harness.post(`/conversations/${body.id}/commands`, { command: script, timeout_s: 30 });
    const out = result.body.stdout as string;
    for (const file of files) {
      const mode = (fs.statSync(file).mode & 0o777).toString(8);
      const md5 = crypto.createHash('md5').update(fs.readFileSync(file)).digest('hex');
      // A copy in the sandbox's root, not a mount of the host's file.
      expect(out).toContain(`${file} ${mode} ${md5} 0\n`);
    }
    if (fs.existsSync('/etc/ssl')) expect(out).toContain('/etc/ssl mounts 1\n');
    expect(out).toContain('APPEND_REFUSED');
    const fds = /^fds (.*)$/m.exec(out)?.[1]?.trim().split(' ').map(Number) ?? [];
    expect(fds.slice(0, 4)).toEqual([0, 1, 2, 3]);
    expect(fds.filter((fd) => fd >= 20 && fd < 50)).toEqual([]);
  });

  it('a copied /etc file the launch cannot open becomes an empty file, not a sandbox that cannot start', () => {
    const dir = tempDir();
    try {
      const readable = path.join(dir, 'readable');
      fs.writeFileSync(readable, 'kept\n');
      const lines = copiedFileRedirections([
        { source: readable, fd: 20, mode: 0o644 },
        { source: path.join(dir, 'gone'), fd: 21, mode: 0o644 },
      ]);
      const out = execFileSync('bash', ['-c', `${lines.join('\n')}\ncat <&20; echo "21: $(readlink /proc/self/fd/21) $(cat <&21 | wc -c)"`], { encoding: 'utf8' });
      expect(out).toBe('kept\n21: /dev/null 0\n');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(!cgroups)('three processes that together pass the sandbox memory limit are OOM-killed; its cgroup goes when the sandbox ends', async () => {
    const { body } = await harness.post('/conversations', {});
    // Each perl holds about 85 MB: one fits in 200 MB, three together do not (each holds it for 5 s, so that all three do at once).
    const allocate = (seconds: number) => `perl -e '$x = "a" x (40 * 1024 * 1024); print "allocated\\n"; sleep ${seconds}'`;
    const alone = await harness.post(`/conversations/${body.id}/commands`, { command: `${allocate(0)}; echo "alone exit $?"`, timeout_s: 60 });
    expect(alone.body.stdout).toBe('allocated\nalone exit 0\n');
    const together = await harness.post(`/conversations/${body.id}/commands`, {
      command: `for i in 1 2 3; do ( ${allocate(5)}; echo "exit $?" ) & done; wait`,
      timeout_s: 60,
    });
    const exits = (together.body.stdout as string).match(/^exit \d+$/gm) ?? [];
    expect(exits).toHaveLength(3);
    expect(exits).toContain('exit 137');
    const workdir = (await harness.get(`/conversations/${body.id}`)).body.workdir as string;
    const directories = cgroups?.directories(`c${sandboxUid(workdir)}`) ?? [];
    expect(directories.length).toBeGreaterThan(0);
    // Removed once its last process has gone (exiting processes may hold it a moment).
    await expect.poll(() => directories.filter((dir) => fs.existsSync(dir)), { timeout: 10_000 }).toEqual([]);
  });

  it("a command filling the workdir is stopped and the LLM is told why (agent's bash and /commands)", async () => {
    // 20 MB/s at most: past the limit within seconds, without a flood of dirty pages that the
    // sandbox's memory cgroup (page cache counts against it) and a busy disk would stall on.
    const fill = 'i=0; while :; do head -c 2M /dev/zero > fill-$i; i=$((i+1)); sleep 0.1; done';
    const { stopped, workdir } = await agentRuns(fill, 120, 'fill the disk');
    expect(stopped.content).toMatch(/the workdir uses \d+ MB, past its limit of 50 MB \(AGENTD_LIMIT_WORKDIR_MB\), so the command was stopped/);
    expect(stopped.data.exit_code).not.toBe(0);
    // The guard measured past the limit, so the loop ran that far, and it stopped well before 120 s.
    const used = Number(execFileSync('du', ['-s', '-B1048576', workdir], { encoding: 'utf8' }).split('\t')[0]);
    expect(used).toBeGreaterThan(50);

    const other = (await harness.post('/conversations', {})).body.id as string;
    const result = await harness.post(`/conversations/${other}/commands`, { command: fill, timeout_s: 120 });
    expect(result.body).toMatchObject({ timed_out: false, exit_code: 137 });
    expect(result.body.stderr).toMatch(/past its limit of 50 MB \(AGENTD_LIMIT_WORKDIR_MB\), so the command was stopped/);
  }, 320_000);

  it('a loop that has its shell ignore SIGINT (`trap \'\' INT`) is stopped with the shell: nothing writes on', async () => {
    // SIGINT and a SIGKILL to the foreground leave bash itself looping: only ending the shell stops it.
    const fill = "trap '' INT; i=0; while :; do head -c 2M /dev/zero > fill-$i; i=$((i+1)); sleep 0.1; done";
    const { stopped, workdir } = await agentRuns(fill, 120, 'fill the disk, ignoring C-c');
    expect(stopped.content).toMatch(/past its limit of 50 MB \(AGENTD_LIMIT_WORKDIR_MB\), so the command was stopped/);
    // Ended (SIGKILL), not left running past its time limit.
    expect(stopped.data.exit_code).toBe(137);
    const written = () => fs.readdirSync(workdir).filter((name) => name.startsWith('fill-')).length;
    const after = written();
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(written()).toBe(after);
  }, 180_000);

  it('background jobs filling the workdir after their command ended are stopped with the shell; the next command is told', async () => {
    // Orphaned at once (the sandbox's init adopts it), ignoring SIGINT and SIGTERM: only ending the shell stops it.
    const fill = "( ( trap '' INT TERM; i=0; while :; do head -c 2M /dev/zero > bg-$i; i=$((i+1)); sleep 0.1; done ) > /dev/null 2>&1 & ); echo started";
    harness.llm.push(bash(fill), { text: 'started it' }, bash('echo again'), { text: 'done' });
    const id = await harness.createConversation({ initial_message: 'fill the disk in the background' });
    await harness.waitForStatus(id, ['idle', 'error']);
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    const written = () => fs.readdirSync(workdir).filter((name) => name.startsWith('bg-')).length;
    // The run is over and the job writes on, until the limit is seen (one measurement every 2 s).
    let before = -1;
    const deadline = Date.now() + 30_000;
    while (written() !== before) {
      if (Date.now() > deadline) throw new Error(`still writing after 30 s: ${written()} files`);
      before = written();
      await new Promise((resolve) => setTimeout(resolve, 1_500));
    }
    // Stopped past the limit, within a few measurements of it: 25 whole files of 2 MiB and the
    // directory's own block are already past 50 MiB (a slow disk can be measured right there).
    expect(before).toBeGreaterThanOrEqual(25);
    expect(before).toBeLessThan(100);

    expect((await harness.post(`/conversations/${id}/messages`, { content: 'go on' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle', 'error']);
    const [, next] = observations(await harness.events(id));
    expect(next.content).toMatch(/past its limit of 50 MB \(AGENTD_LIMIT_WORKDIR_MB\), so the shell with its background jobs was stopped/);
    expect(next.content).toContain('again');
  }, 120_000);

  it('files deleted while held open count against the workdir limit: the command is stopped, then the jobs holding them', async () => {
    // 5 × 20 MB (each under the 30 MB file limit) in files deleted at once: no walk of the workdir finds them.
    const fill = 'for k in 1 2 3 4 5; do ( trap "" INT TERM; exec 3>"gone-$k"; rm -f "gone-$k"; head -c 20M /dev/zero >&3; sleep 60 ) & done; sleep 20; echo finished';
    const { stopped, workdir } = await agentRuns(fill, 60, 'fill the disk with deleted files');
    expect(stopped.content).toMatch(/the workdir uses (9\d|1\d\d) MB, past its limit of 50 MB \(AGENTD_LIMIT_WORKDIR_MB\), so the command was stopped/);
    expect(stopped.content).not.toContain('finished');
    // The jobs ignore SIGINT and SIGTERM and keep the space: watched between commands, they are ended with the shell.
    const deadline = Date.now() + 20_000;
    while (deletedFilesHeld(workdir) > 0) {
      if (Date.now() > deadline) throw new Error(`deleted files of the workdir still held open after 20 s: ${deletedFilesHeld(workdir)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }

    // The same through the commands API: its sandbox ends with the command.
    const other = (await harness.post('/conversations', {})).body.id as string;
    const result = await harness.post(`/conversations/${other}/commands`, { command: fill, timeout_s: 60 });
    expect(result.body).toMatchObject({ timed_out: false, exit_code: 137 });
    expect(result.body.stderr).toMatch(/past its limit of 50 MB \(AGENTD_LIMIT_WORKDIR_MB\), so the command was stopped/);
  }, 150_000);
});

describe('cgroup detection', () => {
  /** A fake /proc/self and cgroup tree in a temp dir: mountinfo points the hierarchies there. */
  function fakeHost(options: { v2Controllers: string; v1: boolean }): { root: string; procSelf: string } {
    const root = fs.realpathSync(tempDir('agentd-cgroup-fake-'));
    const procSelf = path.join(root, 'proc-self');
    fs.mkdirSync(procSelf);
    const unified = path.join(root, 'unified');
    fs.mkdirSync(path.join(unified, 'service'), { recursive: true });
    fs.writeFileSync(path.join(unified, 'service', 'cgroup.controllers'), `${options.v2Controllers}\n`);
    fs.writeFileSync(path.join(unified, 'service', 'cgroup.subtree_control'), '');
    // The server alone in its cgroup (fake: this test process).
    fs.writeFileSync(path.join(unified, 'service', 'cgroup.procs'), `${process.pid}\n`);
    const mounts = [`30 20 0:26 / ${unified} rw,nosuid - cgroup2 cgroup2 rw`];
    const membership = ['0::/service'];
    if (options.v1) {
      for (const [index, name] of ['memory', 'pids'].entries()) {
        fs.mkdirSync(path.join(root, name, 'job'), { recursive: true });
        mounts.push(`${40 + index} 20 0:${30 + index} / ${path.join(root, name)} rw,nosuid - cgroup cgroup rw,${name}`);
        membership.push(`${index + 4}:${name}:/job`);
      }
    }
    fs.writeFileSync(path.join(procSelf, 'mountinfo'), `${mounts.join('\n')}\n`);
    fs.writeFileSync(path.join(procSelf, 'cgroup'), `${membership.join('\n')}\n`);
    return { root, procSelf };
  }

  const limits = { memoryBytes: 200 * 1024 * 1024, pids: 64 };

  it('v2: a delegated subtree gets memory and pids enabled, and the launch script joins the conversation child', () => {
    const { root, procSelf } = fakeHost({ v2Controllers: 'cpu memory pids', v1: true });
    try {
      const { cgroups } = detectSandboxCgroups({ limits, procSelf });
      expect(cgroups?.version).toBe('v2');
      expect(fs.readFileSync(path.join(root, 'unified', 'service', 'cgroup.subtree_control'), 'utf8')).toBe('+memory +pids');
      // Alone in its cgroup, the server moved itself to a leaf first (v2 allows no process in a cgroup with enabled controllers).
      expect(fs.readFileSync(path.join(root, 'unified', 'service', 'agentd-server', 'cgroup.procs'), 'utf8')).toBe(String(process.pid));
      const [dir] = cgroups?.directories('c42') ?? [];
      expect(dir).toBe(path.join(root, 'unified', 'service', 'agentd', 'c42'));
      const pid = execFileSync('bash', ['-c', `${cgroups?.joinScript('c42', findInPath('mkdir', process.env.PATH ?? '')!)}\necho $$`], { encoding: 'utf8' }).trim();
      expect(fs.readFileSync(path.join(dir as string, 'cgroup.procs'), 'utf8').trim()).toBe(pid);
      expect(fs.readFileSync(path.join(dir as string, 'memory.max'), 'utf8').trim()).toBe(String(limits.memoryBytes));
      expect(fs.readFileSync(path.join(dir as string, 'pids.max'), 'utf8').trim()).toBe('64');
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('v1 when the v2 hierarchy lacks the controllers; none (with the reason) when neither works', async () => {
    const hybrid = fakeHost({ v2Controllers: 'hugetlb', v1: true });
    const bare = fakeHost({ v2Controllers: 'hugetlb', v1: false });
    try {
      const { cgroups } = detectSandboxCgroups({ limits, procSelf: hybrid.procSelf });
      expect(cgroups?.version).toBe('v1');
      const dirs = cgroups?.directories('c7') ?? [];
      expect(dirs).toEqual([path.join(hybrid.root, 'memory', 'job', 'agentd', 'c7'), path.join(hybrid.root, 'pids', 'job', 'agentd', 'c7')]);
      // v1: the launch script moves its own thread (`0` to `tasks`), which takes no global lock,
      // rather than its process (`cgroup.procs`), which waits for an RCU grace period (~15 ms).
      // One mkdir (a process) for both directories; none once they are there (a logging mkdir given as the one to run).
      const shims = path.join(hybrid.root, 'shims');
      fs.mkdirSync(shims);
      fs.writeFileSync(path.join(shims, 'mkdir'), `#!/bin/bash\necho "$*" >> ${path.join(hybrid.root, 'mkdir.log')}\nexec ${findInPath('mkdir', process.env.PATH ?? '')} "$@"\n`, { mode: 0o755 });
      const join = () => execFileSync('bash', ['-c', cgroups?.joinScript('c7', path.join(shims, 'mkdir')) ?? 'exit 1'], { stdio: ['ignore', 'pipe', 'pipe'] });
      join();
      expect(fs.readFileSync(path.join(hybrid.root, 'mkdir.log'), 'utf8')).toBe(`-p -- ${dirs.join(' ')}\n`);
      join();
      expect(fs.readFileSync(path.join(hybrid.root, 'mkdir.log'), 'utf8')).toBe(`-p -- ${dirs.join(' ')}\n`);
      for (const dir of dirs) {
        expect(fs.readFileSync(path.join(dir, 'tasks'), 'utf8')).toBe('0\n');
        expect(fs.existsSync(path.join(dir, 'cgroup.procs'))).toBe(false);
      }
      expect(fs.readFileSync(path.join(dirs[0]!, 'memory.limit_in_bytes'), 'utf8')).toBe(`${limits.memoryBytes}\n`);
      expect(fs.readFileSync(path.join(dirs[1]!, 'pids.max'), 'utf8')).toBe('64\n');
      // Made by the server before the spawn (the launcher's beforeStart), off its event loop: the launch then runs no mkdir.
      await cgroups?.makeDirectories('c8');
      execFileSync('bash', ['-c', cgroups?.joinScript('c8', path.join(shims, 'mkdir')) ?? 'exit 1'], { stdio: ['ignore', 'pipe', 'pipe'] });
      expect(fs.readFileSync(path.join(hybrid.root, 'mkdir.log'), 'utf8')).toBe(`-p -- ${dirs.join(' ')}\n`);
      for (const dir of cgroups?.directories('c8') ?? []) expect(fs.readFileSync(path.join(dir, 'tasks'), 'utf8')).toBe('0\n');
      const none = detectSandboxCgroups({ limits, procSelf: bare.procSelf });
      expect(none.cgroups).toBeNull();
      expect(none.reason).toBe('v2: controllers memory, pids not available to the server\'s cgroup; v1: no memory hierarchy');
      expect(detectSandboxCgroups({ limits: { memoryBytes: null, pids: null }, procSelf: hybrid.procSelf }).cgroups).toBeNull();
    } finally {
      fs.rmSync(hybrid.root, { recursive: true, force: true });
      fs.rmSync(bare.root, { recursive: true, force: true });
    }
  });

  it('the start-up sweep removes a killed server\'s empty cgroups off the event loop, and keeps those in use', async () => {
    const { root, procSelf } = fakeHost({ v2Controllers: 'hugetlb', v1: true });
    try {
      const { cgroups } = detectSandboxCgroups({ limits, procSelf });
      const bases = ['memory', 'pids'].map((name) => path.join(root, name, 'job', 'agentd'));
      for (const base of bases) for (let i = 0; i < 40; i++) fs.mkdirSync(path.join(base, `c${i}`), { recursive: true });
      // In use: a real cgroup refuses rmdir with EBUSY, a plain directory with a file in it with ENOTEMPTY.
      for (const base of bases) fs.writeFileSync(path.join(base, 'c7', 'cgroup.procs'), '123\n');
      // In a fake hierarchy the detection's probe is a directory with files too: it stays like c7.
      const inUse = bases.map((base) => fs.readdirSync(base).filter((name) => fs.readdirSync(path.join(base, name)).length > 0));
      const before = bases.map((base) => fs.readdirSync(base).length);
      const sweep = cgroups?.sweep();
      // Nothing removed before the call returned: the rmdirs run on libuv's pool.
      expect(bases.map((base) => fs.readdirSync(base).length)).toEqual(before);
      await sweep;
      for (const [index, base] of bases.entries()) {
        expect(inUse[index]).toContain('c7');
        expect(fs.readdirSync(base).sort()).toEqual(inUse[index]?.sort());
      }
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('workdir ownership', () => {
  it('system directories, their ancestors and shared roots are never given to an agent; project directories are', () => {
    for (const dir of ['/', '/etc', '/etc/ssh', '/usr/local/src/app', '/var', '/var/lib/postgresql', '/home', '/tmp', '/root', '/opt']) expect(isSystemPath(dir), dir).toBe(true);
    for (const dir of ['/home/alice/project', '/tmp/agentd-work', '/root/project', '/opt/app', '/srv/site', '/var/www/site']) expect(isSystemPath(dir), dir).toBe(false);
  });
});
