import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { ChangedPath, ShadowRepository, ShadowTarget } from '../../core/checkpoints/shadow-repository.js';
import { GitError, installedGit, runGit, runGitPair } from './git-program.js';
import type { RunProcess } from '../process/process-spawner.js';
import type { ProcessLauncher } from '../process/process-launcher.js';
import { ShadowOwner } from './shadow-owner.js';
import { DirectoryListings, unchangedSince, workdirFingerprint, type Fingerprint } from './workdir-fingerprint.js';
import { diffTrees, inDefaultFormats, initRepository, writeCommit, writeRef } from './loose-objects.js';
import { EMPTY_TREE } from '../../core/checkpoints/shadow-repository.js';
import { WorkdirChangedError } from '../../core/checkpoints/workdir-changed-error.js';

/**
 * Attributes that win over any `.gitattributes` the agent writes in its workdir: no filter or
 * diff driver, no end-of-line or encoding conversion. (Drivers are only defined in config, which
 * git-program.ts shuts out; this is the second wall.)
 */
const ATTRIBUTES = '* -filter !diff -merge -text -eol -ident -crlf -working-tree-encoding -export-subst -export-ignore\n';
/** Workdirs whose directory listings are kept between fingerprints (each at most the fingerprint's bound of names). */
const LISTINGS_KEPT = 64;
/** The agent's own corner (.agentd) is never recorded; `.git` never is, whatever git version. */
const EXCLUDE = '/.agentd/\n.git\n';

/**
 * A conversation's checkpoints as trees in a git directory of the server's own, with the
 * workdir as its work tree. A snapshot asks `git status` what changed (stat data in the index
 * makes that cheap when little did), stages exactly those paths, and writes a tree: files past
 * the size cap and nested repositories are not recorded; ignored files (.gitignore) neither.
 * Symlinks are stored as symlinks, never followed. Before asking git, a snapshot compares the
 * workdir's stat fingerprint with the one taken at the previous snapshot: when nothing changed
 * (most steps of most runs) the previous tree is the answer and no git runs.
 *
 * With a sandbox, every git that reads or writes the workdir (status, add, update-index,
 * write-tree, read-tree) runs inside the conversation's sandbox as the agent's uid
 * (git-program.ts), where the data dir and the rest of the host do not exist: a directory the
 * agent swaps for a link to them mid-snapshot or mid-rewind leads nowhere. The repository is then
 * the agent's uid's (shadow-owner.ts); what git only reads from it (diff-tree) runs here.
 */
export class GitShadowRepository implements ShadowRepository {
  /** The tree of the last snapshot (by git or by fingerprint). */
  private readonly lastTree = new Map<string, string>();
  /** The tree the index was last written as: what `git status` compares the workdir with. */
  private readonly indexTree = new Map<string, string>();
  private readonly lastCommit = new Map<string, string>();
  /** The workdir's fingerprint taken just before the snapshot that produced lastTree. */
  private readonly lastPrint = new Map<string, Fingerprint>();
  /** Workdirs too large for a fingerprint: git alone decides. */
  private readonly large = new Set<string>();
  /** Repositories in git's default formats (SHA-1, refs as files): their objects and branch are read and written here. */
  private readonly defaultFormats = new Map<string, boolean>();
  /** The directory listings of the last walk of the workdirs fingerprinted most recently (at most LISTINGS_KEPT of them). */
  private readonly listings = new Map<string, DirectoryListings>();
  private checked: Promise<{ ok: true } | { ok: false; reason: string }> | null = null;
  private readonly owner = new ShadowOwner((workdir) => this.options.sandbox?.runsAs?.(workdir) ?? null);

  /**
   * `run`: runs git (the server's ProcessSpawner); default: run by this process. `sandbox`: the
   * conversations' sandbox, where git runs whenever it touches the workdir; none: here.
   */
  constructor(private readonly options: { maxFileBytes: number; run?: RunProcess; sandbox?: ProcessLauncher }) {}

  /** Where runGit runs git. */
  private runner(): { run?: RunProcess } {
    return this.options.run ? { run: this.options.run } : {};
  }

  /** Whether git is installed (a look-up on its PATH, no process). One that is there but fails says so at each use. */
  available(): Promise<{ ok: true } | { ok: false; reason: string }> {
    this.checked ??= Promise.resolve(installedGit() === null ? { ok: false as const, reason: 'git is not installed (apt-get install git)' } : { ok: true as const });
    return this.checked;
  }

  async snapshot(target: ShadowTarget): Promise<string> {
    // Taken before git looks: a change after it is either in git's answer or in the next print.
    const earlier = this.lastPrint.get(target.gitDir);
    const print: Fingerprint = this.large.has(target.gitDir) ? { kind: 'large' } : await workdirFingerprint(target.workdir, this.listingsOf(target.gitDir), earlier, this.options.maxFileBytes);
    if (print.kind === 'large') this.large.add(target.gitDir);
    if (print.kind === 'print') {
      const known = this.lastTree.get(target.gitDir);
      if (known !== undefined && earlier !== undefined && unchangedSince(earlier, print)) return this.remember(target, known, print);
      // An empty workdir needs no git at all (the empty tree is every repository's).
      if (print.empty) return this.remember(target, EMPTY_TREE, print);
    }
    const tree = await this.snapshotWithGit(target, print.kind === 'print' && print.wholeStageable).catch(changedUnder('checkpoint'));
    return this.remember(target, tree, print.kind === 'print' ? print : undefined);
  }

  /** The conversation is deleted: its trees, commit, fingerprint and listings leave memory (they stayed for the process's life). */
  forget(gitDir: string): void {
    for (const map of [this.lastTree, this.indexTree, this.lastCommit, this.lastPrint, this.listings, this.defaultFormats]) map.delete(gitDir);
    this.large.delete(gitDir);
    this.owner.forget(gitDir);
  }

  /** How many repositories something is kept in memory about (tests). */
  get held(): number {
    return new Set([...this.lastTree.keys(), ...this.indexTree.keys(), ...this.lastCommit.keys(), ...this.lastPrint.keys(), ...this.listings.keys(), ...this.defaultFormats.keys(), ...this.large]).size;
  }

  /** A workdir's listings, most recently used last; the least recently used go past LISTINGS_KEPT. */
  private listingsOf(gitDir: string): DirectoryListings {
    const listings = this.listings.get(gitDir) ?? new DirectoryListings();
    this.listings.delete(gitDir);
    this.listings.set(gitDir, listings);
    if (this.listings.size > LISTINGS_KEPT) this.listings.delete(this.listings.keys().next().value!);
    return listings;
  }

  private remember(target: ShadowTarget, tree: string, print: Fingerprint | undefined): string {
    this.lastTree.set(target.gitDir, tree);
    if (print === undefined) this.lastPrint.delete(target.gitDir);
    else this.lastPrint.set(target.gitDir, print);
    return tree;
  }

  /**
   * `wholeStageable`: the walk just now saw no file over the size limit and no nested repository:
   * one `git add -A` stages what changed (what `git status` would list and `update-index` stage),
   * a process less. It names what it staged (`-v`): nothing, and the last tree still stands.
   */
  private async snapshotWithGit(target: ShadowTarget, wholeStageable: boolean): Promise<string> {
    await this.ensureRepository(target.gitDir, target.workdir);
    if (wholeStageable && this.options.sandbox) {
      // One sandbox start for both: in a sandbox the start costs more than either command.
      const { second } = await runGitPair({ gitDir: target.gitDir, workTree: target.workdir, first: ['add', '-A', '--ignore-errors', '--', '.'], second: ['write-tree'], ...this.runner(), sandbox: this.options.sandbox });
      const tree = second.stdout.trim();
      this.indexTree.set(target.gitDir, tree);
      return tree;
    }
    if (wholeStageable) {
      const staged = await this.git(target, ['add', '-A', '-v', '--ignore-errors', '--', '.'], { allowExit: [1] });
      const known = this.indexTree.get(target.gitDir);
      if (staged.stdout === '' && staged.exitCode === 0 && known) return known;
      return this.writeTree(target);
    }
    const status = await this.git(target, ['status', '--porcelain=v1', '-z', '--no-renames', '--untracked-files=all', '--ignore-submodules=all']);
    // Only the work tree against the index counts (`?X`, `??`): the index against HEAD is the shadow's own business.
    const entries = status.stdout.split('\0').filter((entry) => entry.length > 3 && (entry[1] !== ' ' || entry.startsWith('??')));
    const known = this.indexTree.get(target.gitDir);
    if (entries.length === 0 && known) return known;
    const stage: string[] = [];
    const drop: string[] = [];
    for (const entry of entries) {
      const relative = entry.slice(3);
      // A nested repository (`sub/`): its files are its own repository's business.
      if (relative.endsWith('/')) continue;
      const stat = fs.lstatSync(path.join(target.workdir, relative), { throwIfNoEntry: false });
      const pastCap = stat?.isFile() === true && stat.size > this.options.maxFileBytes;
      if (!pastCap) stage.push(relative);
      // Past the cap: out of the index; one not in it (`??`, untracked) needs no git to stay out.
      else if (!entry.startsWith('??')) drop.push(relative);
    }
    if (stage.length > 0 && drop.length === 0 && this.options.sandbox) {
      // Stage and write-tree in one sandbox start, as above: the start costs more than either command.
      const { second } = await runGitPair({ gitDir: target.gitDir, workTree: target.workdir, first: ['update-index', '--add', '--remove', '-z', '--stdin'], input: joinZ(stage), fallback: ['add', '-A', '--ignore-errors', '--', '.'], second: ['write-tree'], ...this.runner(), sandbox: this.options.sandbox });
      const tree = second.stdout.trim();
      this.indexTree.set(target.gitDir, tree);
      return tree;
    }
    if (stage.length > 0) {
      try {
        await this.git(target, ['update-index', '--add', '--remove', '-z', '--stdin'], { input: joinZ(stage) });
      } catch (error) {
        if (!(error instanceof GitError)) throw error;
        // A path changed kind under us (a file became a directory): stage everything instead, past errors.
        await this.git(target, ['add', '-A', '--ignore-errors', '--', '.'], { allowExit: [1] });
      }
    }
    if (drop.length > 0) await this.git(target, ['update-index', '--force-remove', '-z', '--stdin'], { input: joinZ(drop) });
    return this.writeTree(target);
  }

  private async writeTree(target: ShadowTarget): Promise<string> {
    const tree = (await this.git(target, ['write-tree'])).stdout.trim();
    this.indexTree.set(target.gitDir, tree);
    return tree;
  }

  async keep(target: ShadowTarget, tree: string, message: string): Promise<string> {
    // The empty tree is known to every repository: there is nothing to keep (and no repository yet, maybe).
    if (tree === EMPTY_TREE) return '';
    await this.ensureRepository(target.gitDir, target.workdir);
    let parent: string | undefined = this.lastCommit.get(target.gitDir);
    if (parent === undefined) {
      const head = await this.readGit(target, ['rev-parse', '--verify', '-q', 'refs/heads/checkpoints'], { allowExit: [1] });
      parent = head.stdout.trim();
    }
    let commit: string;
    if (this.inDefaultFormats(target.gitDir)) {
      commit = writeCommit(target.gitDir, { tree, parent, message, date: new Date() });
      writeRef(target.gitDir, 'refs/heads/checkpoints', commit);
      // Written by the server: given to the uid the sandboxed git writes the rest of the repository as.
      if (this.options.sandbox) this.owner.give(target.gitDir, target.workdir, [`objects/${commit.slice(0, 2)}`, `objects/${commit.slice(0, 2)}/${commit.slice(2)}`, 'refs/heads/checkpoints']);
    } else {
      commit = (await this.git(target, ['commit-tree', tree, ...(parent ? ['-p', parent] : []), '-m', message])).stdout.trim();
      await this.git(target, ['update-ref', 'refs/heads/checkpoints', commit]);
    }
    this.lastCommit.set(target.gitDir, commit);
    return commit;
  }

  private inDefaultFormats(gitDir: string): boolean {
    let known = this.defaultFormats.get(gitDir);
    if (known === undefined) this.defaultFormats.set(gitDir, (known = inDefaultFormats(gitDir)));
    return known;
  }

  async changes(target: ShadowTarget, from: string, to: string): Promise<ChangedPath[]> {
    if (from === to) return [];
    // Read from the trees' own objects; git when one is not loose (a `git gc` packed it).
    const read = this.inDefaultFormats(target.gitDir) ? diffTrees(target.gitDir, from, to) : null;
    if (read !== null) return read;
    const out = (await this.readGit(target, ['diff-tree', '-r', '-z', '--no-renames', '--name-status', from, to])).stdout.split('\0');
    const changes: ChangedPath[] = [];
    for (let i = 0; i + 1 < out.length; i += 2) {
      const letter = out[i]!;
      const file = out[i + 1]!;
      changes.push({ path: file, status: letter === 'A' ? 'added' : letter === 'D' ? 'deleted' : 'modified' });
    }
    return changes;
  }

  async diffs(target: ShadowTarget, from: string, to: string, paths: readonly string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (let i = 0; i < paths.length; i += 100) {
      const batch = [...paths.slice(i, i + 100)].sort(byGitOrder);
      const text = (await this.readGit(target, ['diff-tree', '-r', '-p', '--no-renames', '--no-ext-diff', '--no-textconv', '--no-color', from, to, '--', ...batch])).stdout;
      const chunks = text.split(/^(?=diff --git )/m).filter((chunk) => chunk.startsWith('diff --git '));
      if (chunks.length === batch.length) batch.forEach((file, index) => out.set(file, chunks[index]!));
      else {
        for (const file of batch) out.set(file, (await this.readGit(target, ['diff-tree', '-r', '-p', '--no-renames', '--no-ext-diff', '--no-textconv', '--no-color', from, to, '--', file])).stdout);
      }
    }
    return out;
  }

  async restore(target: ShadowTarget, from: string, to: string): Promise<void> {
    const changed = await this.changes(target, from, to);
    if (changed.length === 0) return;
    // read-tree moves the workdir from what the index holds: a snapshot by fingerprint left it as it was.
    if (this.indexTree.get(target.gitDir) !== from) await this.snapshotWithGit(target, false).catch(changedUnder('restore'));
    // `-m -u from to`: git's own checkout: it never writes through a symlink it finds on the way.
    await this.ensureRepository(target.gitDir, target.workdir);
    await this.git(target, ['read-tree', '--reset', '-u', to]).catch(changedUnder('restore'));
    this.indexTree.set(target.gitDir, to);
    this.remember(target, to, undefined);
    // In the sandbox git wrote as the agent's uid already; here (no sandbox) the agent runs as the server.
    if (!this.options.sandbox) reown(target.workdir, changed.filter((change) => change.status !== 'deleted').map((change) => change.path));
  }

  async exportTree(gitDir: string, tree: string, intoDir: string): Promise<void> {
    if (tree === EMPTY_TREE) return;
    const indexFile = path.join(gitDir, `export-${randomBytes(6).toString('hex')}.index`);
    try {
      await runGit({ gitDir, workTree: intoDir, indexFile, args: ['read-tree', '--reset', '-u', tree], ...this.runner() });
    } finally {
      fs.rmSync(indexFile, { force: true });
    }
  }

  /** git on the workdir: in the conversation's sandbox when there is one. */
  private git(target: ShadowTarget, args: string[], options: { input?: string; allowExit?: number[] } = {}) {
    return runGit({ gitDir: target.gitDir, workTree: target.workdir, args, ...options, ...this.runner(), ...(this.options.sandbox && { sandbox: this.options.sandbox }) });
  }

  /** git that only reads the repository (never the workdir, never writing): here, without a sandbox's start. */
  private readGit(target: ShadowTarget, args: string[], options: { allowExit?: number[] } = {}) {
    return runGit({ gitDir: target.gitDir, args, ...options, ...this.runner() });
  }

  /** Created whole or not at all: a temp directory renamed into place once it is set up. */
  private async ensureRepository(gitDir: string, workdir: string): Promise<void> {
    if (this.options.sandbox) {
      // The sandbox gives the workdir to the agent's uid first: that is whom the repository goes to.
      await this.options.sandbox.ready?.({ workdir, network: false });
      await this.createRepository(gitDir);
      this.owner.ensure(gitDir, workdir);
      return;
    }
    await this.createRepository(gitDir);
  }

  private async createRepository(gitDir: string): Promise<void> {
    if (fs.existsSync(path.join(gitDir, 'HEAD'))) return;
    const parent = path.dirname(gitDir);
    fs.mkdirSync(parent, { recursive: true });
    // Not `*.tmp`: the conversation repository removes such files from the directory at load.
    const prefix = `${path.basename(gitDir)}-init-`;
    for (const name of fs.readdirSync(parent)) if (name.startsWith(prefix)) fs.rmSync(path.join(parent, name), { recursive: true, force: true });
    const temp = path.join(parent, `${prefix}${randomBytes(6).toString('hex')}`);
    try {
      initRepository(temp, 'checkpoints');
      fs.mkdirSync(path.join(temp, 'info'), { recursive: true });
      fs.writeFileSync(path.join(temp, 'info', 'attributes'), ATTRIBUTES);
      fs.writeFileSync(path.join(temp, 'info', 'exclude'), EXCLUDE);
      fs.renameSync(temp, gitDir);
      // A new repository has no checkpoint commit yet: the first keep() need not ask git.
      this.lastCommit.set(gitDir, '');
    } catch (error) {
      fs.rmSync(temp, { recursive: true, force: true });
      if (!fs.existsSync(path.join(gitDir, 'HEAD'))) throw error;
    }
  }
}

/**
 * git's fatal exit (128) on a workdir whose entries moved while it read or wrote them (a
 * directory swapped for a link, a file gone between listing and reading) as the client's
 * conflict; git that could not run at all stays an internal error.
 */
function changedUnder(step: 'checkpoint' | 'restore'): (error: unknown) => never {
  return (error) => {
    if (error instanceof GitError && error.result.exitCode === 128) throw new WorkdirChangedError(step);
    throw error;
  };
}

function joinZ(paths: readonly string[]): string {
  return paths.map((entry) => `${entry}\0`).join('');
}

/** git's path order (byte order of the UTF-8 path). */
function byGitOrder(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

/**
 * A server running as root wrote the restored files: they go back to the workdir's owner (the
 * agent's uid in the sandbox), with their new parent directories; symlinks are never followed.
 */
function reown(workdir: string, paths: readonly string[]): void {
  if (process.getuid?.() !== 0) return;
  const owner = fs.statSync(workdir);
  if (owner.uid === 0) return;
  const done = new Set<string>();
  for (const relative of paths) {
    let current = relative;
    while (current !== '.' && current !== '' && !done.has(current)) {
      done.add(current);
      const absolute = path.join(workdir, current);
      const stat = fs.lstatSync(absolute, { throwIfNoEntry: false });
      if (stat && stat.uid !== owner.uid) fs.lchownSync(absolute, owner.uid, owner.gid);
      current = path.dirname(current);
    }
  }
}
