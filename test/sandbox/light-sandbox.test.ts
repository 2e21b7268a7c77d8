/**
 * The light start (ProcessSpec.light) the server's own git runs in on a workdir (checkpoints):
 * faster, but the same walls as the agent's sandbox: the agent's uid (as root), no capability,
 * no network, nothing of the host but the system's programs, /etc/gitconfig and the loader's
 * cache, the workdir and what the caller binds; no descriptor of the launch.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runGit, runGitPair } from '../../src/adapters/git/git-program.js';
import { GitShadowRepository } from '../../src/adapters/git/git-shadow-repository.js';
import { ProcessSpawner, type RunProcess } from '../../src/adapters/process/process-spawner.js';
import { BwrapProcessLauncher } from '../../src/adapters/sandbox/bwrap-launcher.js';
import { findInPath } from '../../src/adapters/sandbox/mounts.js';
import { NO_LIMITS } from '../../src/adapters/sandbox/resource-limits.js';
import { selectProcessLauncher } from '../../src/adapters/sandbox/select-process-launcher.js';
import { tempDir } from '../support/agentd.js';

const probeDir = tempDir('agentd-light-probe-');
const { fallbackReason } = await selectProcessLauncher({ requested: 'auto', limits: NO_LIMITS, searchPath: process.env.PATH ?? '', hiddenPaths: [], extraReadOnlyPaths: [], stateDir: probeDir });
fs.rmSync(probeDir, { recursive: true, force: true });
if (fallbackReason) console.warn(`test/sandbox/light-sandbox.test.ts skipped: bubblewrap cannot run here (${fallbackReason})`);

const searchPath = process.env.PATH ?? '/usr/bin:/bin';
const asRoot = process.getuid?.() === 0;

describe.skipIf(fallbackReason !== null)('the light sandbox of the server’s git', () => {
  const dir = tempDir('agentd-light-');
  const workdir = path.join(dir, 'work');
  const bound = path.join(dir, 'data', 'shadow.git');
  const decoy = path.join(dir, 'data', 'master.key');
  fs.mkdirSync(workdir, { recursive: true });
  fs.mkdirSync(bound, { recursive: true });
  fs.writeFileSync(decoy, 'decoy\n');
  fs.mkdirSync(path.join(dir, 'state'));
  const launcher = new BwrapProcessLauncher({ bwrapPath: findInPath('bwrap', searchPath)!, limits: NO_LIMITS, hiddenPaths: [path.join(dir, 'data')], stateDir: path.join(dir, 'state'), searchPath });

  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('runs as the agent (as root: not uid 0, no capability), sees only the system, the workdir and its binds, has no network and no extra descriptor', async () => {
    const script = [
      'echo "uid $(id -u)"',
      'echo "caps $(grep CapEff /proc/self/status | tr -d "\\t")"',
      'echo "etc $(ls /etc | tr "\\n" " ")"',
      `[ -e '${decoy}' ] && echo "VISIBLE decoy"`,
      'echo "bound $(ls -d /.agentd-test 2>/dev/null)"',
      'echo "net $(ls /sys/class/net 2>/dev/null | tr "\\n" " ") $(grep -c : /proc/net/dev)"',
      'ls /proc/$$/fd >/tmp/fds; echo "fds $(sort -n /tmp/fds | tr "\\n" " ")"',
    ].join('\n');
    const prepared = launcher.prepare({ command: 'bash', args: ['--norc', '--noprofile', '-c', script], cwd: workdir, env: { PATH: searchPath }, sandbox: { workdir, network: false }, binds: [{ source: bound, target: '/.agentd-test' }], light: true });
    const child = spawn(prepared.command, prepared.args, { cwd: prepared.cwd, env: prepared.env, stdio: ['ignore', 'pipe', 'pipe', 'ignore', 'ignore', 'ignore', 'pipe'] });
    let out = '';
    child.stdout!.on('data', (chunk) => (out += chunk));
    child.stderr!.on('data', (chunk) => (out += chunk));
    const code = await new Promise((resolve) => child.once('exit', resolve));
    prepared.release?.();
    expect(code, out).toBe(0);
    expect(out).not.toContain('VISIBLE');
    expect(/^etc (.*)$/m.exec(out)?.[1]?.trim()).toBe('gitconfig ld.so.cache');
    expect(out).toMatch(/^bound \/\.agentd-test$/m);
    // The loopback only: one interface line in /proc/net/dev.
    expect(/^net .* (\d+)$/m.exec(out)?.[1]).toBe('1');
    expect(out).toMatch(/^caps CapEff:0+$/m);
    // bash's own descriptors at rest: stdio, and 255 (its script's, when it reads one) at most.
    expect(/^fds (.*)$/m.exec(out)?.[1]?.trim().split(' ').filter((fd) => Number(fd) > 2 && fd !== '255')).toEqual([]);
    if (asRoot) expect(out).not.toMatch(/^uid 0$/m);
  });
});

describe.skipIf(fallbackReason !== null)('a checkpoint’s git in the light sandbox', () => {
  const dir = tempDir('agentd-light-git-');
  const target = { workdir: path.join(dir, 'work'), gitDir: path.join(dir, 'data', 'shadow.git') };
  fs.mkdirSync(path.join(dir, 'state'));
  const launcher = new BwrapProcessLauncher({ bwrapPath: findInPath('bwrap', searchPath)!, limits: NO_LIMITS, hiddenPaths: [path.join(dir, 'data')], stateDir: path.join(dir, 'state'), searchPath });

  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('stages and writes the tree in one start when git status decides, and falls back to git add -A in that start', async () => {
    fs.mkdirSync(path.join(target.workdir, 'src'), { recursive: true });
    fs.writeFileSync(path.join(target.workdir, 'src', 'a.ts'), 'a\n');
    fs.writeFileSync(path.join(target.workdir, 'item'), 'a file\n');
    // A file past the cap: the walk leaves the decision to git status, then stage, then write-tree.
    fs.writeFileSync(path.join(target.workdir, 'big.bin'), Buffer.alloc(2048));
    let starts = 0;
    const spawner = new ProcessSpawner();
    const run: RunProcess = (request) => {
      starts++;
      return spawner.run(request);
    };
    try {
      const shadow = new GitShadowRepository({ maxFileBytes: 1024, run, sandbox: launcher });
      const files = async (tree: string) => (await runGit({ gitDir: target.gitDir, args: ['ls-tree', '-r', '--name-only', tree] })).stdout.trim().split('\n');
      expect(await files(await shadow.snapshot(target))).toEqual(['item', 'src/a.ts']);
      fs.writeFileSync(path.join(target.workdir, 'src', 'b.ts'), 'b\n');
      starts = 0;
      expect(await files(await shadow.snapshot(target))).toEqual(['item', 'src/a.ts', 'src/b.ts']);
      expect(starts).toBe(2);
      // A file that became a directory: its removal and its new file, in the same start.
      fs.rmSync(path.join(target.workdir, 'item'));
      fs.mkdirSync(path.join(target.workdir, 'item'));
      fs.writeFileSync(path.join(target.workdir, 'item', 'inner.ts'), 'inner\n');
      starts = 0;
      expect(await files(await shadow.snapshot(target))).toEqual(['item/inner.ts', 'src/a.ts', 'src/b.ts']);
      expect(starts).toBe(2);
      // update-index refusing a path (here one gone without --remove): git add -A stages instead, in the same start.
      fs.writeFileSync(path.join(target.workdir, 'src', 'c.ts'), 'c\n');
      starts = 0;
      const { first, second } = await runGitPair({ gitDir: target.gitDir, workTree: target.workdir, first: ['update-index', '--add', '-z', '--stdin'], input: 'gone.ts\0', fallback: ['add', '-A', '--ignore-errors', '--', '.'], second: ['write-tree'], run, sandbox: launcher });
      expect(first.stderr).toContain('gone.ts');
      expect(await files(second.stdout.trim())).toEqual(['big.bin', 'item/inner.ts', 'src/a.ts', 'src/b.ts', 'src/c.ts']);
      expect(starts).toBe(1);
    } finally {
      spawner.close();
    }
  });
});
