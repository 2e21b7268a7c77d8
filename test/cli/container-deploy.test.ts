import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { networkHelperFailure } from '../../src/adapters/sandbox/network.js';
import { spawnServer, tempDir, TEST_KEY } from '../support/agentd.js';

// The image and compose file cannot be run here (no Docker): what they say is parsed and
// checked, and the sandbox's start-up probe runs under the shipped profile's rules.
const ROOT = path.resolve(import.meta.dirname, '../..');
const PROFILE_PATH = path.join(ROOT, 'deploy/seccomp-agentd.json');
const NAMESPACE_SYSCALLS = ['clone', 'clone3', 'unshare', 'mount', 'umount2', 'pivot_root', 'setns'];
const LLM_VARIABLES = ['AGENTD_LLM_MODEL', 'AGENTD_LLM_BASE_URL', 'AGENTD_LLM_API_KEY', 'OPENAI_API_KEY'];

interface Rule {
  names: string[];
  action: string;
  errnoRet?: number;
  args?: { index: number; value: number; valueTwo?: number; op: string }[];
  comment?: string;
  includes?: { caps?: string[]; arches?: string[]; minKernel?: string };
  excludes?: { caps?: string[]; arches?: string[] };
}
interface Profile { defaultAction: string; defaultErrnoRet?: number; archMap?: unknown[]; syscalls: Rule[] }

const profile = (): Profile => JSON.parse(fs.readFileSync(PROFILE_PATH, 'utf8')) as Profile;

/** The Dockerfile's final stage: its ENV pairs and the packages its apt-get installs. */
function runtimeStage(): { env: Record<string, string>; packages: string[] } {
  const text = fs.readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  const lines = text.replace(/\\\n/g, ' ').split('\n').filter((line) => !line.trimStart().startsWith('#'));
  const lastFrom = lines.map((line, i) => (/^FROM\s/i.test(line) ? i : -1)).filter((i) => i >= 0).at(-1)!;
  const stage = lines.slice(lastFrom);
  const env: Record<string, string> = {};
  for (const line of stage.filter((line) => /^ENV\s/i.test(line))) {
    for (const match of line.slice(4).matchAll(/([A-Z_][A-Z0-9_]*)=("[^"]*"|\S+)/g)) env[match[1]!] = match[2]!.replace(/^"|"$/g, '');
  }
  const install = stage.find((line) => /apt-get install/.test(line)) ?? '';
  const packages = (install.split(/apt-get install/)[1] ?? '').split('&&')[0]!.trim().split(/\s+/).filter((word) => !word.startsWith('-'));
  return { env, packages };
}

describe('the container image', () => {
  it('forces the bubblewrap sandbox and installs procps', () => {
    const { env, packages } = runtimeStage();
    expect(env.AGENTD_SANDBOX).toBe('bwrap');
    expect(packages).toEqual(expect.arrayContaining(['procps', 'bubblewrap', 'slirp4netns', 'passt']));
  });

  it('compose gives every agentd instance the seccomp profile, /dev/net/tun and the LLM variables', () => {
    const compose = parseYaml(fs.readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, any> };
    const instances = Object.entries(compose.services).filter(([name]) => name.startsWith('agentd'));
    expect(instances.length).toBeGreaterThan(0);
    for (const [name, service] of instances) {
      const seccomp = (service.security_opt as string[]).find((option) => option.startsWith('seccomp='));
      expect(seccomp, name).toBeDefined();
      expect(path.resolve(ROOT, seccomp!.slice('seccomp='.length))).toBe(PROFILE_PATH);
      expect(service.security_opt, name).toContain('systempaths=unconfined');
      expect(service.devices, name).toContain('/dev/net/tun');
      for (const variable of LLM_VARIABLES) expect(Object.keys(service.environment), `${name} ${variable}`).toContain(variable);
      // Passed through from compose's environment: a fixed value here would override the operator's.
      for (const variable of LLM_VARIABLES) expect(service.environment[variable], `${name} ${variable}`).toBeNull();
    }
  });

  it('the seccomp profile is Docker-format JSON that allows the namespace syscalls unconditionally', () => {
    const { defaultAction, defaultErrnoRet, syscalls } = profile();
    expect(defaultAction).toBe('SCMP_ACT_ERRNO');
    expect(defaultErrnoRet).toBe(1);
    const actions = new Set(['SCMP_ACT_ALLOW', 'SCMP_ACT_ERRNO', 'SCMP_ACT_KILL', 'SCMP_ACT_KILL_PROCESS', 'SCMP_ACT_TRAP', 'SCMP_ACT_TRACE', 'SCMP_ACT_LOG']);
    for (const rule of syscalls) {
      expect(Array.isArray(rule.names) && rule.names.length > 0).toBe(true);
      expect(actions.has(rule.action), rule.action).toBe(true);
    }
    for (const name of NAMESPACE_SYSCALLS) {
      const rules = syscalls.filter((rule) => rule.names.includes(name));
      expect(rules.some((rule) => rule.action === 'SCMP_ACT_ALLOW' && !rule.args && !rule.includes && !rule.excludes), name).toBe(true);
      // No rule for it that a container without CAP_SYS_ADMIN would still hit first.
      expect(rules.filter((rule) => rule.action !== 'SCMP_ACT_ALLOW'), name).toEqual([]);
    }
    // Still Docker's default otherwise: what no container may do stays refused.
    const unconditional = new Set(syscalls.filter((rule) => rule.action === 'SCMP_ACT_ALLOW' && !rule.includes?.caps).flatMap((rule) => rule.names));
    for (const name of ['init_module', 'kexec_load', 'reboot', 'bpf', 'perf_event_open', 'open_by_handle_at', 'keyctl', 'add_key']) expect(unconditional.has(name), name).toBe(false);
  });
});

describe('a server that cannot sandbox', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('AGENTD_SANDBOX=bwrap with a bubblewrap that fails as under Docker refuses to start and names the run options', async () => {
    const dir = tempDir();
    dirs.push(dir);
    const bin = path.join(dir, 'bin');
    fs.mkdirSync(bin);
    fs.writeFileSync(path.join(bin, 'bwrap'), '#!/bin/sh\necho "bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces." >&2\nexit 1\n', { mode: 0o755 });
    const started = spawnServer({ dataDir: path.join(dir, 'data'), env: { AGENTD_SANDBOX: 'bwrap', AGENTD_AGENT_PATH: `${bin}:/usr/bin:/bin` } });
    const error = await started.then(
      () => null,
      (failure: Error) => failure,
    );
    expect(error?.message).toMatch(/exited early \(1\)/);
    expect(error?.message).toContain('No permissions to create new namespace');
    for (const option of ['--security-opt unmask=/proc/*', '--device /dev/net/tun', '--security-opt seccomp=deploy/seccomp-agentd.json', '--security-opt systempaths=unconfined', 'apparmor=unconfined', 'AGENTD_SANDBOX=none']) {
      expect(error?.message).toContain(option);
    }
  });

  it('AGENTD_SANDBOX=none is degraded on /health, while /alive is unaffected', async () => {
    const dir = tempDir();
    dirs.push(dir);
    const server = await spawnServer({ dataDir: dir, env: { AGENTD_SANDBOX: 'none' } });
    try {
      const health = (await (await fetch(`${server.url}/health`)).json()) as any;
      expect(health.status).toBe('degraded');
      expect(health.checks.sandbox.ok).toBe(false);
      expect(health.checks.sandbox.detail).toMatch(/unsandboxed/);
      const alive = await fetch(`${server.url}/alive`);
      expect(alive.status).toBe(200);
      expect(await alive.json()).toEqual({ status: 'ok' });
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
  });

  it('the start-up log names the address actually listened on', async () => {
    const dir = tempDir();
    dirs.push(dir);
    const server = await spawnServer({ dataDir: dir, args: ['--host', '0.0.0.0'], env: { AGENTD_SANDBOX: 'none', AGENTD_LOG_LEVEL: 'info' } });
    try {
      for (let i = 0; i < 200 && !server.output().includes('agentd listening'); i++) await new Promise((resolve) => setTimeout(resolve, 50));
      const line = server.output().split('\n').find((text) => text.includes('agentd listening'));
      expect(line).toBeDefined();
      expect(line).toContain(`0.0.0.0:${server.port}`);
      expect(line).not.toContain(`127.0.0.1:${server.port}`);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
  });

  it('a network helper without /dev/net/tun is reported as the missing device, not a missing package', () => {
    const dir = tempDir();
    dirs.push(dir);
    const reason = networkHelperFailure('slirp4netns', 'the probe exited with 1', path.join(dir, 'no-tun'));
    expect(reason).toContain('/dev/net/tun');
    expect(reason).toContain('--device /dev/net/tun');
    expect(reason).not.toMatch(/install|package/i);
    fs.writeFileSync(path.join(dir, 'tun'), '');
    expect(networkHelperFailure('pasta', 'the probe exited with 1', path.join(dir, 'tun'))).toBe('pasta cannot attach to a sandbox here: the probe exited with 1');
  });
});

// Capabilities a Docker container keeps by default: rules that need another one do not apply.
const DOCKER_DEFAULT_CAPS = new Set(['CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_FSETID', 'CAP_FOWNER', 'CAP_MKNOD', 'CAP_NET_RAW', 'CAP_SETGID', 'CAP_SETUID', 'CAP_SETFCAP', 'CAP_SETPCAP', 'CAP_NET_BIND_SERVICE', 'CAP_SYS_CHROOT', 'CAP_KILL', 'CAP_AUDIT_WRITE']);
const OPS: Record<string, number> = { SCMP_CMP_NE: 1, SCMP_CMP_LT: 2, SCMP_CMP_LE: 3, SCMP_CMP_EQ: 4, SCMP_CMP_GE: 5, SCMP_CMP_GT: 6, SCMP_CMP_MASKED_EQ: 7 };
const DOCKER_ARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64' };

/** The profile as Docker applies it to a container with the default capabilities on this machine's architecture, in seccomp-exec's rules format. */
function rulesFile(source: Profile): string {
  const arch = DOCKER_ARCH[process.arch] ?? process.arch;
  const lines = [`default ${source.defaultErrnoRet ?? 1}`];
  for (const rule of source.syscalls) {
    if (rule.includes?.caps && !rule.includes.caps.every((cap) => DOCKER_DEFAULT_CAPS.has(cap))) continue;
    if (rule.includes?.arches && !rule.includes.arches.includes(arch)) continue;
    if (rule.excludes?.caps?.some((cap) => DOCKER_DEFAULT_CAPS.has(cap))) continue;
    if (rule.excludes?.arches?.includes(arch)) continue;
    const action = rule.action === 'SCMP_ACT_ALLOW' ? 'allow' : 'errno';
    // Docker's masked comparison: `value` is the mask, `valueTwo` what the masked argument must equal.
    const args = (rule.args ?? []).map((arg) => `${arg.index} ${OPS[arg.op]} ${arg.value} ${arg.valueTwo ?? 0}`);
    for (const name of rule.names) lines.push(`${name} ${action} ${rule.errnoRet ?? 1} ${args.length} ${args.join(' ')}`.trim());
  }
  return `${lines.join('\n')}\n`;
}

/** Docker's own default profile, rebuilt from the shipped one: without the added rule, with the two clone rules it replaced (as upstream has them). */
function dockerDefault(shipped: Profile): Profile {
  const syscalls = shipped.syscalls.filter((rule) => !rule.comment?.startsWith('agentd'));
  syscalls.push(
    { names: ['clone'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: 2114060288, op: 'SCMP_CMP_MASKED_EQ' }], excludes: { caps: ['CAP_SYS_ADMIN'], arches: ['s390', 's390x'] } },
    { names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: 38, excludes: { caps: ['CAP_SYS_ADMIN'] } },
  );
  return { ...shipped, syscalls };
}

const LIBSECCOMP = ['/usr/lib/x86_64-linux-gnu/libseccomp.so.2', '/usr/lib/aarch64-linux-gnu/libseccomp.so.2', '/usr/lib64/libseccomp.so.2', '/usr/lib/libseccomp.so.2'].find((file) => fs.existsSync(file));
const hasCompiler = (() => {
  try {
    execFileSync('cc', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
const bwrapWorks = (() => {
  try {
    execFileSync('bwrap', ['--ro-bind', '/', '/', '--unshare-user', '--unshare-pid', '--proc', '/proc', 'true'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe.skipIf(!LIBSECCOMP || !hasCompiler || !bwrapWorks)('the sandbox under the seccomp profile (needs cc, libseccomp and a working bubblewrap)', () => {
  let dir: string;
  let helper: string;
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const startUnder = (source: Profile, name: string) => {
    if (!helper) {
      dir = tempDir();
      helper = path.join(dir, 'seccomp-exec');
      execFileSync('cc', ['-O', '-o', helper, path.join(ROOT, 'test/support/seccomp-exec.c'), LIBSECCOMP!]);
    }
    const rules = path.join(dir, `${name}.rules`);
    fs.writeFileSync(rules, rulesFile(source));
    return spawnServer({ dataDir: path.join(dir, `${name}-data`), command: [helper, rules, process.execPath, path.join(ROOT, 'dist/cli.js')], env: { AGENTD_SANDBOX: 'bwrap' } });
  };

  it('the start-up probe passes under the shipped profile, and the agent runs sandboxed', async () => {
    const server = await startUnder(profile(), 'shipped');
    try {
      const info = (await (await fetch(`${server.url}/info`, { headers: { authorization: `Bearer ${TEST_KEY}` } })).json()) as any;
      expect(info.sandbox.mode).toBe('bwrap');
      const health = (await (await fetch(`${server.url}/health`)).json()) as any;
      expect(health.checks.sandbox.ok).toBe(true);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
  });

  it("under Docker's default profile the probe fails and the server does not start", async () => {
    const error = await startUnder(dockerDefault(profile()), 'docker-default').then(
      (server) => (server.child.kill('SIGKILL'), null),
      (failure: Error) => failure,
    );
    expect(error?.message).toMatch(/AGENTD_SANDBOX=bwrap, but bubblewrap cannot run here/);
    expect(error?.message).toMatch(/namespace failed: Operation not permitted/);
  });
});
