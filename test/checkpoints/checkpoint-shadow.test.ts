import fs from 'node:fs';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { GitShadowRepository } from '../../src/adapters/git/git-shadow-repository.js';
import { runGit } from '../../src/adapters/git/git-program.js';
import { ProcessSpawner, type RunProcess } from '../../src/adapters/process/process-spawner.js';
import { runHere } from '../../src/adapters/process/spawn-here.js';
import { EMPTY_TREE } from '../../src/core/checkpoints/shadow-repository.js';
import { tempDir } from '../support/agentd.js';

const gitMissing = (() => {
  try {
    execFileSync('git', ['--version'], { stdio: 'ignore' });
    return null;
  } catch {
    return 'skipped: git is not installed (apt-get install git)';
  }
})();

let base: string;
let workdir: string;
let gitDir: string;
const savedEnv: Record<string, string | undefined> = {};

beforeEach(() => {
  base = tempDir('agentd-shadow-');
  workdir = path.join(base, 'workdir');
  gitDir = path.join(base, 'data', 'shadow.git');
  fs.mkdirSync(workdir);
});

afterEach(() => {
  for (const [key, value] of Object.entries(savedEnv)) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
  fs.rmSync(base, { recursive: true, force: true });
});

function setEnv(values: Record<string, string>): void {
  for (const [key, value] of Object.entries(values)) {
    if (!(key in savedEnv)) savedEnv[key] = process.env[key];
    process.env[key] = value;
  }
}

/** Every entry under `dir` (not following symlinks) with its type and content hash. */
function fingerprint(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (current: string) => {
    for (const entry of fs.readdirSync(current, { withFileTypes: true })) {
      const full = path.join(current, entry.name);
      const relative = path.relative(dir, full);
      if (entry.isSymbolicLink()) out[relative] = `link:${fs.readlinkSync(full)}`;
      else if (entry.isDirectory()) {
        out[relative] = 'dir';
        walk(full);
      } else out[relative] = `file:${createHash('sha256').update(fs.readFileSync(full)).digest('hex')}:${fs.statSync(full).mode.toString(8)}`;
    }
  };
  walk(dir);
  return out;
}

function write(relative: string, text: string): void {
  fs.mkdirSync(path.dirname(path.join(workdir, relative)), { recursive: true });
  fs.writeFileSync(path.join(workdir, relative), text);
}

/** The entries of a tree: path → mode. */
async function treeEntries(tree: string): Promise<Record<string, string>> {
  const listed = (await runGit({ gitDir, args: ['ls-tree', '-r', '-z', tree] })).stdout.split('\0').filter(Boolean);
  return Object.fromEntries(listed.map((line) => [line.split('\t')[1]!, line.split(' ')[0]!]));
}

// The server's git runs through its spawner (process-spawner.ts): every test both ways.
const spawner = new ProcessSpawner();
afterAll(() => spawner.close());

describe.skipIf(gitMissing)('whether git is there', () => {
  it('is a look-up on the PATH git runs with, its absolute entries only: a git on a relative entry does not count', async () => {
    const gitPath = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
    expect(await new GitShadowRepository({ maxFileBytes: 1024 }).available()).toEqual({ ok: true });
    // A PATH without git, but for a relative entry holding one: the agent's workdir is git's cwd.
    const relative = path.join(base, 'rel');
    fs.mkdirSync(path.join(relative, 'bin'), { recursive: true });
    fs.copyFileSync(gitPath, path.join(relative, 'bin', 'git'));
    fs.chmodSync(path.join(relative, 'bin', 'git'), 0o755);
    const cwd = process.cwd();
    process.chdir(relative);
    try {
      setEnv({ PATH: `bin:${path.join(base, 'empty')}` });
      expect(await new GitShadowRepository({ maxFileBytes: 1024 }).available()).toEqual({ ok: false, reason: 'git is not installed (apt-get install git)' });
      setEnv({ PATH: `bin:${path.join(relative, 'bin')}` });
      expect(await new GitShadowRepository({ maxFileBytes: 1024 }).available()).toEqual({ ok: true });
    } finally {
      process.chdir(cwd);
    }
  });
});

describe.skipIf(gitMissing).each([
  ['git spawned here', undefined],
  ['git through a spawner', spawner.run],
] as const)('shadow repository (%s)', (_name, run) => {
  it('a hostile workdir cannot make the server\'s git run anything (filters, diff drivers, fsmonitor, hooks, env config)', async () => {
    const decoy = (name: string) => path.join(base, `PWNED-${name}`);
    const home = path.join(base, 'home');
    fs.mkdirSync(home);
    const evilConfig = [
      '[filter "pwn"]',
      `\tclean = touch ${decoy('clean')}; cat`,
      `\tsmudge = touch ${decoy('smudge')}; cat`,
      '[diff "pwn"]',
      `\ttextconv = touch ${decoy('textconv')}; cat`,
      `\tcommand = touch ${decoy('diffcmd')}; true`,
      '[core]',
      `\tfsmonitor = touch ${decoy('fsmonitor')}; true`,
      `\thooksPath = ${path.join(base, 'hooks')}`,
      '',
    ].join('\n');
    fs.writeFileSync(path.join(home, '.gitconfig'), evilConfig);
    fs.mkdirSync(path.join(base, 'hooks'));
    for (const hook of ['post-index-change', 'post-checkout', 'pre-commit', 'reference-transaction']) {
      fs.writeFileSync(path.join(base, 'hooks', hook), `#!/bin/sh\ntouch ${decoy(`hook-${hook}`)}\n`, { mode: 0o755 });
    }
    // What the agent can write: attributes naming the drivers, its own .git with config and hooks, a nested repository.
    write('.gitattributes', '* filter=pwn diff=pwn merge=pwn\n');
    write('code.txt', 'one\n');
    execFileSync('git', ['init', '-q', workdir], { env: { PATH: process.env.PATH!, HOME: path.join(base, 'nohome') } });
    fs.appendFileSync(path.join(workdir, '.git', 'config'), evilConfig);
    write('sub/.git/config', evilConfig);
    write('sub/.git/HEAD', 'ref: refs/heads/main\n');

    // The attack is real: a plain git with this environment runs the driver.
    const control = path.join(base, 'control');
    fs.cpSync(workdir, control, { recursive: true });
    execFileSync('git', ['-C', control, 'add', '-A'], { env: { PATH: process.env.PATH!, HOME: home }, stdio: 'ignore' });
    expect(fs.existsSync(decoy('clean'))).toBe(true);
    fs.rmSync(control, { recursive: true, force: true });
    for (const name of fs.readdirSync(base)) if (name.startsWith('PWNED-')) fs.rmSync(path.join(base, name));

    // The server's environment carries the hostile config every way git reads it.
    setEnv({ HOME: home, GIT_CONFIG_GLOBAL: path.join(home, '.gitconfig'), GIT_CONFIG_COUNT: '1', GIT_CONFIG_KEY_0: 'filter.pwn.clean', GIT_CONFIG_VALUE_0: `touch ${decoy('envconfig')}; cat`, GIT_DIR: path.join(workdir, '.git') });
    const shadow = new GitShadowRepository({ maxFileBytes: 1024 * 1024, ...(run && { run }) });
    const target = { gitDir, workdir };
    const first = await shadow.snapshot(target);
    await shadow.keep(target, first, 'first');
    write('code.txt', 'two\n');
    write('new.txt', 'new\n');
    const second = await shadow.snapshot(target);
    const changes = await shadow.changes(target, first, second);
    expect(changes).toEqual([
      { path: 'code.txt', status: 'modified' },
      { path: 'new.txt', status: 'added' },
    ]);
    const diffs = await shadow.diffs(target, first, second, ['code.txt', 'new.txt']);
    expect(diffs.get('code.txt')).toContain('-one\n+two');
    await shadow.restore(target, second, first);
    expect(fs.readFileSync(path.join(workdir, 'code.txt'), 'utf8')).toBe('one\n');
    const exported = path.join(base, 'exported');
    fs.mkdirSync(exported);
    await shadow.exportTree(gitDir, second, exported);
    expect(fs.readFileSync(path.join(exported, 'code.txt'), 'utf8')).toBe('two\n');

    expect(fs.readdirSync(base).filter((name) => name.startsWith('PWNED-'))).toEqual([]);
    // Content went in and out unfiltered; the user's .git and the nested repository were not recorded.
    const entries = await treeEntries(second);
    expect(Object.keys(entries).sort()).toEqual(['.gitattributes', 'code.txt', 'new.txt']);
  });

  it('stores symlinks as symlinks and never writes through one on restore', async () => {
    const outside = path.join(base, 'outside');
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(outside, 'canary.txt'), 'canary\n');
    const outsideBefore = fingerprint(outside);
    write('dir/file.txt', 'inside\n');
    fs.symlinkSync('../outside/canary.txt', path.join(workdir, 'file-link'));
    const shadow = new GitShadowRepository({ maxFileBytes: 1024 * 1024, ...(run && { run }) });
    const target = { gitDir, workdir };
    const withDir = await shadow.snapshot(target);
    expect((await treeEntries(withDir))['file-link']).toBe('120000');

    // The agent swaps the directory for a symlink out of the workdir, and the file link for a file.
    fs.rmSync(path.join(workdir, 'dir'), { recursive: true });
    fs.symlinkSync('../outside', path.join(workdir, 'dir'));
    fs.rmSync(path.join(workdir, 'file-link'));
    write('file-link', 'now a file\n');
    const withLink = await shadow.snapshot(target);
    const entries = await treeEntries(withLink);
    expect(entries.dir).toBe('120000');
    expect(entries['file-link']).toBe('100644');

    await shadow.restore(target, withLink, withDir);
    expect(fs.lstatSync(path.join(workdir, 'dir')).isDirectory()).toBe(true);
    expect(fs.readFileSync(path.join(workdir, 'dir', 'file.txt'), 'utf8')).toBe('inside\n');
    expect(fs.readlinkSync(path.join(workdir, 'file-link'))).toBe('../outside/canary.txt');
    expect(fingerprint(outside)).toEqual(outsideBefore);

    await shadow.restore(target, withDir, withLink);
    expect(fs.readlinkSync(path.join(workdir, 'dir'))).toBe('../outside');
    expect(fingerprint(outside)).toEqual(outsideBefore);
  });

  it('leaves out ignored files, files past the size cap, the agent area and the user\'s .git, and restore leaves them alone', async () => {
    write('.gitignore', 'build/\n*.log\n');
    write('src/main.ts', 'main\n');
    write('build/out.js', 'built\n');
    write('debug.log', 'log\n');
    write('.agentd/jobs/1.log', 'job\n');
    write('huge.bin', 'x'.repeat(4096));
    execFileSync('git', ['init', '-q', workdir], { env: { PATH: process.env.PATH!, HOME: path.join(base, 'nohome') } });
    const userGit = fingerprint(path.join(workdir, '.git'));
    const shadow = new GitShadowRepository({ maxFileBytes: 1024, ...(run && { run }) });
    const target = { gitDir, workdir };
    const first = await shadow.snapshot(target);
    expect(Object.keys(await treeEntries(first)).sort()).toEqual(['.gitignore', 'src/main.ts']);
    write('src/main.ts', 'changed\n');
    write('build/out.js', 'rebuilt\n');
    write('huge.bin', 'y'.repeat(8192));
    fs.rmSync(path.join(workdir, 'debug.log'));
    write('src/extra.ts', 'extra\n');
    const second = await shadow.snapshot(target);
    expect(await shadow.changes(target, first, second)).toEqual([
      { path: 'src/extra.ts', status: 'added' },
      { path: 'src/main.ts', status: 'modified' },
    ]);
    await shadow.restore(target, second, first);
    expect(fs.readFileSync(path.join(workdir, 'src/main.ts'), 'utf8')).toBe('main\n');
    expect(fs.existsSync(path.join(workdir, 'src/extra.ts'))).toBe(false);
    expect(fs.readFileSync(path.join(workdir, 'build/out.js'), 'utf8')).toBe('rebuilt\n');
    expect(fs.readFileSync(path.join(workdir, 'huge.bin'), 'utf8')).toBe('y'.repeat(8192));
    expect(fingerprint(path.join(workdir, '.git'))).toEqual(userGit);
    // A small file that grows past the cap leaves the next checkpoint (and is kept on restore).
    write('src/main.ts', 'z'.repeat(2048));
    const third = await shadow.snapshot(target);
    expect(await shadow.changes(target, first, third)).toEqual([{ path: 'src/main.ts', status: 'deleted' }]);
  });

  it('stages with one `git add -A` when the walk saw nothing over the size cap and no nested repository, else through `git status`', async () => {
    const subcommands: string[] = [];
    const counted: RunProcess = (request) => {
      subcommands.push(request.args.find((arg, index) => !arg.startsWith('-') && !['-c', '--git-dir', '--work-tree'].includes(request.args[index - 1]!))!);
      return (run ?? runHere)(request);
    };
    const shadow = new GitShadowRepository({ maxFileBytes: 1024, run: counted });
    const target = { gitDir, workdir };
    const entries = async (tree: string) => Object.keys(await treeEntries(tree)).sort();
    write('a.txt', 'a\n');
    write('sub/b.txt', 'b\n');
    const first = await shadow.snapshot(target);
    // The repository is made without git (initRepository).
    expect(subcommands).toEqual(['add', 'write-tree']);
    // Added, modified, deleted: one add stages them all, then the tree.
    subcommands.length = 0;
    write('a.txt', 'changed\n');
    fs.rmSync(path.join(workdir, 'sub/b.txt'));
    write('c.txt', 'c\n');
    const second = await shadow.snapshot(target);
    expect(subcommands).toEqual(['add', 'write-tree']);
    expect(await shadow.changes(target, first, second)).toEqual([
      { path: 'a.txt', status: 'modified' },
      { path: 'c.txt', status: 'added' },
      { path: 'sub/b.txt', status: 'deleted' },
    ]);
    // The same content written again: its stat data changed, nothing to stage, the last tree stands.
    subcommands.length = 0;
    write('c.txt', 'c\n');
    expect(await shadow.snapshot(target)).toBe(second);
    expect(subcommands).toEqual(['add']);
    // A new file over the cap: through status, and it stays out (never in the index: nothing to remove from it).
    subcommands.length = 0;
    write('big.bin', 'x'.repeat(2048));
    write('a.txt', 'again\n');
    const third = await shadow.snapshot(target);
    expect(subcommands).toEqual(['status', 'update-index', 'write-tree']);
    expect(await entries(third)).toEqual(['a.txt', 'c.txt']);
    // A file in the index that grows past the cap is removed from it.
    subcommands.length = 0;
    write('c.txt', 'y'.repeat(2048));
    const grown = await shadow.snapshot(target);
    expect(subcommands).toEqual(['status', 'update-index', 'write-tree']);
    expect(await entries(grown)).toEqual(['a.txt']);
    write('c.txt', 'c\n');
    // A repository nested below the top: through status, and it stays out (`git add -A` would add it as a gitlink).
    fs.rmSync(path.join(workdir, 'big.bin'));
    execFileSync('git', ['init', '-q', path.join(workdir, 'nested')], { env: { PATH: process.env.PATH!, HOME: path.join(base, 'nohome') } });
    write('nested/x.txt', 'x\n');
    write('d.txt', 'd\n');
    subcommands.length = 0;
    const fourth = await shadow.snapshot(target);
    expect(subcommands[0]).toBe('status');
    expect(await entries(fourth)).toEqual(['a.txt', 'c.txt', 'd.txt']);
  });

  it('makes its repository as `git init` would: the same HEAD and config, a repository `git fsck` finds sound', async () => {
    const shadow = new GitShadowRepository({ maxFileBytes: 1024, ...(run && { run }) });
    write('a.txt', 'a\n');
    const tree = await shadow.snapshot({ gitDir, workdir });
    await shadow.keep({ gitDir, workdir }, tree, 'first');
    const byGit = path.join(base, 'by-git.git');
    await runGit({ gitDir: byGit, args: ['init', '-q', '--template=', '--initial-branch=checkpoints'] });
    for (const file of ['HEAD', 'config']) expect(fs.readFileSync(path.join(gitDir, file), 'utf8')).toBe(fs.readFileSync(path.join(byGit, file), 'utf8'));
    const local = async (dir: string) => (await runGit({ gitDir: dir, args: ['config', '--list', '--local'] })).stdout;
    expect(await local(gitDir)).toBe(await local(byGit));
    for (const dir of ['objects/info', 'objects/pack', 'refs/heads', 'refs/tags']) expect(fs.statSync(path.join(gitDir, dir)).isDirectory()).toBe(true);
    expect((await runGit({ gitDir, args: ['fsck', '--strict', '--no-dangling'] })).exitCode).toBe(0);
    expect((await runGit({ gitDir, args: ['log', '--format=%s', 'checkpoints'] })).stdout).toBe('first\n');
  });

  it('answers from the workdir\'s stat fingerprint when nothing changed (no git runs), and still sees every change', async () => {
    const shadow = new GitShadowRepository({ maxFileBytes: 1024 * 1024, ...(run && { run }) });
    const target = { gitDir, workdir };
    const noGit = path.join(base, 'no-git-here');
    fs.mkdirSync(noGit);
    // An empty workdir is the empty tree, without git (or a repository).
    setEnv({ PATH: noGit });
    expect(await shadow.snapshot(target)).toBe(EMPTY_TREE);
    expect(await shadow.keep(target, EMPTY_TREE, 'empty')).toBe('');
    setEnv({ PATH: savedEnv.PATH! });
    write('a.txt', 'aaaa\n');
    write('sub/b.txt', 'bbbb\n');
    const first = await shadow.snapshot(target);
    expect(Object.keys(await treeEntries(first)).sort()).toEqual(['a.txt', 'sub/b.txt']);
    // Unchanged: the same tree, git not asked.
    setEnv({ PATH: noGit });
    expect(await shadow.snapshot(target)).toBe(first);
    // Same size, written in the same instant, its old mtime put back: still a change.
    const stat = fs.statSync(path.join(workdir, 'a.txt'));
    write('a.txt', 'AAAA\n');
    fs.utimesSync(path.join(workdir, 'a.txt'), stat.atimeMs / 1000, (Math.trunc(stat.mtimeMs) + 0.5) / 1000);
    expect(Math.trunc(fs.statSync(path.join(workdir, 'a.txt')).mtimeMs)).toBe(Math.trunc(stat.mtimeMs));
    await expect(shadow.snapshot(target)).rejects.toThrow();
    setEnv({ PATH: savedEnv.PATH! });
    const second = await shadow.snapshot(target);
    expect(await shadow.changes(target, first, second)).toEqual([{ path: 'a.txt', status: 'modified' }]);
    // Emptied (the index still lists the files), then the same files again: their tree, not the empty one.
    fs.rmSync(path.join(workdir, 'a.txt'));
    fs.rmSync(path.join(workdir, 'sub'), { recursive: true });
    expect(await shadow.snapshot(target)).toBe(EMPTY_TREE);
    write('a.txt', 'AAAA\n');
    write('sub/b.txt', 'bbbb\n');
    expect(await shadow.snapshot(target)).toBe(second);
    // A restore from a tree taken by fingerprint starts from the workdir as it is.
    fs.rmSync(path.join(workdir, 'a.txt'));
    fs.rmSync(path.join(workdir, 'sub'), { recursive: true });
    expect(await shadow.snapshot(target)).toBe(EMPTY_TREE);
    await shadow.restore(target, EMPTY_TREE, first);
    expect(fs.readFileSync(path.join(workdir, 'a.txt'), 'utf8')).toBe('aaaa\n');
    expect(await shadow.snapshot(target)).toBe(first);
    write('sub/new.txt', 'new\n');
    expect(await shadow.changes(target, first, await shadow.snapshot(target))).toEqual([{ path: 'sub/new.txt', status: 'added' }]);
  });
});

describe.skipIf(gitMissing)('the server\'s git', () => {
  it('is never a `git` of the workdir, even when the server\'s PATH has an empty or relative entry', async () => {
    // Git runs with the workdir as its current directory; an empty PATH entry means that directory.
    const workdir = tempDir();
    const gitDir = tempDir();
    const saved = process.env.PATH;
    try {
      const marker = path.join(workdir, 'ran-git');
      fs.writeFileSync(path.join(workdir, 'git'), `#!/bin/sh\necho ran > ${marker}\n`, { mode: 0o755 });
      process.env.PATH = `::.:${saved ?? '/usr/bin:/bin'}`;
      const result = await runGit({ gitDir, workTree: workdir, args: ['--version'] });
      expect(result.stdout).toMatch(/^git version /);
      expect(fs.existsSync(marker)).toBe(false);
    } finally {
      process.env.PATH = saved;
      fs.rmSync(workdir, { recursive: true, force: true });
      fs.rmSync(gitDir, { recursive: true, force: true });
    }
  });
});

describe.skipIf(gitMissing)('a checkpoint with few git processes', () => {
  /** The paths between two trees as git itself tells them. */
  async function gitChanges(from: string, to: string): Promise<{ path: string; status: string }[]> {
    const out = (await runGit({ gitDir, args: ['diff-tree', '-r', '-z', '--no-renames', '--name-status', from, to] })).stdout.split('\0');
    const changes: { path: string; status: string }[] = [];
    for (let i = 0; i + 1 < out.length; i += 2) changes.push({ path: out[i + 1]!, status: out[i] === 'A' ? 'added' : out[i] === 'D' ? 'deleted' : 'modified' });
    return changes;
  }

  /** changes() answered with no git on the PATH (from the trees' objects), or null when it needed git. */
  async function changesWithoutGit(shadow: GitShadowRepository, from: string, to: string): Promise<unknown[] | null> {
    const noGit = path.join(base, 'no-git-here');
    fs.mkdirSync(noGit, { recursive: true });
    setEnv({ PATH: noGit });
    try {
      return await shadow.changes({ gitDir, workdir }, from, to);
    } catch {
      return null;
    } finally {
      setEnv({ PATH: savedEnv.PATH! });
    }
  }

  it('writes the commits and the branch that `git commit-tree` and `git update-ref` would, byte for byte', async () => {
    const shadow = new GitShadowRepository({ maxFileBytes: 1024 * 1024 });
    const target = { gitDir, workdir };
    const commits: string[] = [];
    const trees: string[] = [];
    for (let i = 0; i < 3; i++) {
      write(`file-${i}.txt`, `content ${i}\n`);
      const tree = await shadow.snapshot(target);
      trees.push(tree);
      commits.push(await shadow.keep(target, tree, `tool before seq ${i + 1}`));
    }
    // git reads them as its own: the branch, the chain, and a strict check of the objects.
    expect((await runGit({ gitDir, args: ['rev-parse', 'refs/heads/checkpoints'] })).stdout.trim()).toBe(commits[2]);
    expect((await runGit({ gitDir, args: ['log', '--format=%H %T %s', 'refs/heads/checkpoints'] })).stdout.trim().split('\n')).toEqual(
      [2, 1, 0].map((i) => `${commits[i]} ${trees[i]} tool before seq ${i + 1}`),
    );
    await runGit({ gitDir, args: ['fsck', '--strict', '--no-dangling'] });
    // The very bytes git makes of the same commit (same author, date and message).
    const date = (await runGit({ gitDir, args: ['log', '-1', '--format=%at', commits[1]!] })).stdout.trim();
    const byGit = execFileSync('git', ['--git-dir', gitDir, 'commit-tree', trees[1]!, '-p', commits[0]!, '-m', 'tool before seq 2'], {
      encoding: 'utf8',
      env: { PATH: process.env.PATH!, HOME: path.join(base, 'nohome'), GIT_CONFIG_NOSYSTEM: '1', GIT_AUTHOR_NAME: 'agentd', GIT_AUTHOR_EMAIL: 'agentd@localhost', GIT_COMMITTER_NAME: 'agentd', GIT_COMMITTER_EMAIL: 'agentd@localhost', GIT_AUTHOR_DATE: `${date} +0000`, GIT_COMMITTER_DATE: `${date} +0000` },
    });
    expect(byGit.trim()).toBe(commits[1]);
    // Nothing half-written is left beside them.
    expect(fs.readdirSync(gitDir).filter((name) => name.endsWith('.tmp'))).toEqual([]);
  });

  it('a repository in another format (SHA-256 objects) has its commits made by git', async () => {
    fs.mkdirSync(path.dirname(gitDir), { recursive: true });
    await runGit({ gitDir, args: ['init', '-q', '--object-format=sha256', '--initial-branch=checkpoints'] });
    const shadow = new GitShadowRepository({ maxFileBytes: 1024 * 1024 });
    const target = { gitDir, workdir };
    write('a.txt', 'a\n');
    const tree = await shadow.snapshot(target);
    const commit = await shadow.keep(target, tree, 'first');
    expect(commit).toMatch(/^[0-9a-f]{64}$/);
    expect((await runGit({ gitDir, args: ['log', '--format=%H %T', 'refs/heads/checkpoints'] })).stdout.trim()).toBe(`${commit} ${tree}`);
  });

  it('tells what changed between two trees from their objects, as `git diff-tree` does, over random changes', async () => {
    const shadow = new GitShadowRepository({ maxFileBytes: 2048 });
    const target = { gitDir, workdir };
    write('.gitignore', '*.log\nbuild/\n');
    write('e.log', 'ignored\n');
    let previous = await shadow.snapshot(target);
    expect(await changesWithoutGit(shadow, EMPTY_TREE, previous)).toEqual([{ path: '.gitignore', status: 'added' }]);
    const trees = [previous];
    // A seeded generator: the same sequence each run.
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return Math.floor(seed / 65536) % n;
    };
    // `g` and `g/h.txt` turn a file into a directory and back; `dir.txt` sorts between `dir` and `dir/…` by bytes.
    const names = ['a.txt', 'b.txt', 'dir/c.txt', 'dir/sub/d.txt', 'e.log', 'build/f.js', 'g', 'g/h.txt', 'dir.txt', 'link'];
    const done = new Set<string>();
    let answered = 0;
    for (let round = 0; round < 40; round++) {
      for (let k = 0; k < 1 + random(3); k++) {
        const name = names[random(names.length)]!;
        const full = path.join(workdir, name);
        // A parent that is a file now goes first (`g` before `g/h.txt`).
        const parent = fs.lstatSync(path.dirname(full), { throwIfNoEntry: false });
        if (parent && !parent.isDirectory()) fs.rmSync(path.dirname(full));
        const existing = fs.lstatSync(full, { throwIfNoEntry: false });
        const action = random(6);
        if (existing?.isDirectory()) {
          fs.rmSync(full, { recursive: true });
          done.add('directory removed');
        } else if (action === 0 && existing) {
          fs.rmSync(full);
          done.add('deleted');
        } else if (action === 1 && existing?.isFile()) {
          fs.chmodSync(full, existing.mode & 0o100 ? 0o644 : 0o755);
          done.add('mode');
        } else if (action === 2) {
          done.add('symlink');
          if (existing) fs.rmSync(full);
          fs.mkdirSync(path.dirname(full), { recursive: true });
          fs.symlinkSync(`target-${round}`, full);
        } else if (action === 3) {
          if (existing) fs.rmSync(full);
          write(name, 'x'.repeat(4096)); // past the size cap
          done.add(existing ? 'grew past the cap' : 'new past the cap');
        } else {
          done.add('written');
          if (existing && !existing.isFile()) fs.rmSync(full);
          write(name, `round ${round} ${random(3)}\n`);
        }
      }
      const tree = await shadow.snapshot(target);
      trees.push(tree);
      // The previous tree, and one further back (either way round): each as git tells it.
      const earlier = trees[random(trees.length)]!;
      for (const [from, to] of [[previous, tree], [earlier, tree], [tree, earlier]] as const) {
        const expected = await gitChanges(from, to);
        const read = await changesWithoutGit(shadow, from, to);
        if (read !== null) answered++;
        expect(read, `round ${round}`).toEqual(from === to ? [] : expected);
      }
      previous = tree;
    }
    expect([...done].sort()).toEqual(['deleted', 'directory removed', 'grew past the cap', 'mode', 'new past the cap', 'symlink', 'written']);
    expect(answered).toBe(120);
  });

  it('a file written just before a snapshot and left alone needs no git at the next one, after its young moments', async () => {
    const shadow = new GitShadowRepository({ maxFileBytes: 1024 * 1024 });
    const target = { gitDir, workdir };
    write('a.txt', 'a\n');
    const first = await shadow.snapshot(target);
    // Seconds on (an agent's next step): the file's stamps are old now, its content as it was.
    const later = Date.now() + 3_000;
    vi.spyOn(Date, 'now').mockReturnValue(later);
    try {
      const noGit = path.join(base, 'no-git-here');
      fs.mkdirSync(noGit);
      setEnv({ PATH: noGit });
      expect(await shadow.snapshot(target)).toBe(first);
      setEnv({ PATH: savedEnv.PATH! });
      // A change is still one.
      write('a.txt', 'b\n');
      const second = await shadow.snapshot(target);
      expect(second).not.toBe(first);
      expect(await shadow.changes(target, first, second)).toEqual([{ path: 'a.txt', status: 'modified' }]);
    } finally {
      vi.restoreAllMocks();
    }
  });

  it('a repository whose objects were packed (git gc) has its changes told by git', async () => {
    const shadow = new GitShadowRepository({ maxFileBytes: 1024 * 1024 });
    const target = { gitDir, workdir };
    write('kept.txt', 'kept\n');
    write('dir/one.txt', 'one\n');
    const first = await shadow.snapshot(target);
    await shadow.keep(target, first, 'first');
    write('kept.txt', 'changed\n');
    fs.rmSync(path.join(workdir, 'dir'), { recursive: true });
    const second = await shadow.snapshot(target);
    await shadow.keep(target, second, 'second');
    await runGit({ gitDir, args: ['repack', '-a', '-d', '-q'] });
    await runGit({ gitDir, args: ['prune-packed'] });
    expect(await changesWithoutGit(shadow, first, second)).toBeNull();
    expect(await shadow.changes(target, first, second)).toEqual([
      { path: 'dir/one.txt', status: 'deleted' },
      { path: 'kept.txt', status: 'modified' },
    ]);
  });
});
