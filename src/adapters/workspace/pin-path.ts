/**
 * Resolution of a client's or the model's path inside a workdir without a window for races: the
 * walk holds each directory open (pinned-directory.ts) and looks up the next component in it
 * with lstat, so it never follows a symlink by accident. A symlink it meets is expanded by
 * hand: its target must stay inside the workdir (an absolute one below the workdir's path, a
 * relative one never climbing above the root with `..`), dangling links and loops are refused.
 * The caller then works through the pinned parent (`at()`): a directory swapped for a symlink
 * to the data dir after the check changes nothing, because the path the call uses no longer
 * goes through names. Syntax checks come first (parseUserPath); see resolve-path.ts for the
 * error types.
 */
import { lchown, lstat, mkdir, readlink, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { InvalidPathError } from '../../core/workspace/invalid-path-error.js';
import { PathNotFoundError } from '../../core/workspace/path-not-found-error.js';
import { PathOutsideWorkdirError } from '../../core/workspace/path-outside-workdir-error.js';
import { PinnedDirectory } from './pinned-directory.js';
import { isInsideRoot, parseUserPath, type ParsedUserPath, type ResolveOptions } from '../../core/workspace/resolve-path.js';

const MAX_SYMLINK_HOPS = 40;
/** A walk that lost a race (a directory became something else between lstat and open) starts over this often. */
const RACE_RETRIES = 3;

class LostRace extends Error {}

interface Step {
  name: string;
  /** Part of a symlink's target, not of the path as given. */
  fromLink: boolean;
}

/** A resolved path: its parent directory held open, and the names below it. */
export class PinnedPath {
  /** The workdir's real path. */
  readonly root: string;
  /** The entry's name in its parent; null for the workdir itself. */
  readonly name: string | null;
  private readonly rootDirectory: PinnedDirectory;
  private parent: PinnedDirectory | null;
  /** Names from the parent down that do not exist yet (the last is `name`); empty when the entry exists. */
  private missing: string[];
  private readonly held: PinnedDirectory[];

  constructor(options: { root: string; rootDirectory: PinnedDirectory; parent: PinnedDirectory | null; name: string | null; missing: string[]; held: PinnedDirectory[] }) {
    this.root = options.root;
    this.rootDirectory = options.rootDirectory;
    this.parent = options.parent;
    this.name = options.name;
    this.missing = options.missing;
    this.held = options.held;
  }

  get exists(): boolean {
    return this.missing.length === 0;
  }

  /** The entry's real path (what it is called, for messages and relative names). */
  get real(): string {
    if (this.parent === null) return this.root;
    return [this.parent.real, ...(this.missing.length > 0 ? this.missing : [this.name])].join('/');
  }

  /** A path naming the entry through its pinned parent, for any filesystem call. */
  at(): string {
    if (this.parent === null) return this.rootDirectory.at('.');
    if (this.missing.length > 1) throw new Error(`create the parents of ${this.real} first (ensureParent)`);
    return this.parent.at(this.name as string);
  }

  /** The parent directory, held open (null for the workdir itself). */
  get parentDirectory(): PinnedDirectory | null {
    return this.parent;
  }

  /**
   * Who owns the workdir: what the server creates in it is given to them (the agent's uid in a
   * sandbox run as root), so nothing the server makes for the agent is owned by root.
   */
  async owner(): Promise<{ uid: number; gid: number }> {
    const stats = await stat(this.rootDirectory.at('.'));
    return { uid: stats.uid, gid: stats.gid };
  }

  /** Gives the entry (never a symlink's target) to the workdir's owner; for what the server just created. */
  async adopt(): Promise<void> {
    await giveTo(this.at(), await this.owner());
  }

  /** Opens the entry as a directory, never through a symlink; the caller closes it. */
  async openDirectory(): Promise<PinnedDirectory> {
    if (this.parent === null) return PinnedDirectory.open(this.rootDirectory.at('.'), this.root);
    return this.parent.openChild(this.name as string);
  }

  /**
   * Creates the missing directories above the entry, each pinned as it is made; returns those it
   * made as (parent, name), the parents held until release().
   */
  async ensureParent(): Promise<{ parent: PinnedDirectory; name: string }[]> {
    const created: { parent: PinnedDirectory; name: string }[] = [];
    while (this.missing.length > 1) {
      const [next] = this.missing as [string];
      const parent = this.parent as PinnedDirectory;
      const made = await mkdir(parent.at(next)).then(
        () => true,
        (error: NodeJS.ErrnoException) => {
          if (error.code === 'EEXIST') return false;
          throw error;
        },
      );
      if (made) await giveTo(parent.at(next), await this.owner());
      const child = await parent.openChild(next);
      this.held.push(child);
      if (made) created.push({ parent, name: next });
      this.parent = child;
      this.missing = this.missing.slice(1);
    }
    return created;
  }

  async release(): Promise<void> {
    await Promise.all(this.held.splice(0).map((directory) => directory.close()));
  }
}

/**
 * Resolves `userPath` in `workdir` and returns it pinned; release() it when done. Missing
 * trailing components are allowed (for create, mkdir and upload) unless `mustExist`.
 */
export async function pinInWorkdir(workdir: string, userPath: string, options: ResolveOptions = {}): Promise<PinnedPath> {
  const parsed = parseUserPath(userPath, options);
  const root = await realWorkdir(workdir);
  const segments = parsed.absolute ? absoluteToSegments({ workdir, root, userPath, parsed }) : parsed.segments;
  for (let attempt = 0; ; attempt++) {
    try {
      return await walk({ root, segments, userPath, options });
    } catch (error) {
      if (!(error instanceof LostRace)) throw error;
      if (attempt >= RACE_RETRIES) throw new InvalidPathError(userPath, 'it kept changing while it was being resolved (a directory swapped for a symlink)');
    }
  }
}

/** The real path `userPath` resolves to (nothing held). For checks whose use cannot be pinned, like a command's cwd. */
export async function resolveInWorkdir(workdir: string, userPath: string, options: ResolveOptions = {}): Promise<string> {
  const pinned = await pinInWorkdir(workdir, userPath, options);
  await pinned.release();
  return pinned.real;
}

async function walk(options: { root: string; segments: string[]; userPath: string; options: ResolveOptions }): Promise<PinnedPath> {
  const { root, userPath } = options;
  const rootDirectory = await PinnedDirectory.open(root, root);
  const stack = [rootDirectory];
  const held = [rootDirectory];
  const done = (parent: PinnedDirectory | null, name: string | null, missing: string[] = []) =>
    new PinnedPath({ root, rootDirectory, parent, name, missing, held });
  try {
    const queue: Step[] = options.segments.map((name) => ({ name, fromLink: false }));
    let hops = 0;
    while (queue.length > 0) {
      const step = queue.shift() as Step;
      const top = stack[stack.length - 1] as PinnedDirectory;
      if (step.name === '..') {
        if (stack.length === 1) throw new PathOutsideWorkdirError(userPath, 'it goes through a symlink that points outside the workdir');
        stack.pop();
        continue;
      }
      const isLast = queue.length === 0;
      const stats = await lstat(top.at(step.name)).catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT') return undefined;
        throw error;
      });
      if (!stats) {
        if (step.fromLink || queue.some((next) => next.fromLink)) throw new InvalidPathError(userPath, 'it goes through a dangling symlink');
        if (options.options.mustExist) throw new PathNotFoundError(userPath);
        const missing = [step.name, ...queue.map((next) => next.name)];
        return done(top, missing[missing.length - 1] as string, missing);
      }
      if (stats.isSymbolicLink()) {
        if (isLast && options.options.keepFinalSymlink) return done(top, step.name);
        if (++hops > MAX_SYMLINK_HOPS) throw new InvalidPathError(userPath, 'it goes through a symlink loop');
        const target = await readlink(top.at(step.name)).catch(() => {
          throw new LostRace();
        });
        const parts = target.split('/').filter((part) => part !== '' && part !== '.');
        if (path.isAbsolute(target)) {
          const rootParts = root.split('/').filter((part) => part !== '');
          if (!rootParts.every((part, index) => parts[index] === part)) {
            throw new PathOutsideWorkdirError(userPath, 'it goes through a symlink that points outside the workdir');
          }
          stack.length = 1;
          parts.splice(0, rootParts.length);
        }
        queue.unshift(...parts.map((name) => ({ name, fromLink: true })));
        continue;
      }
      if (stats.isDirectory() && !isLast) {
        const child = await top.openChild(step.name).catch((error: NodeJS.ErrnoException) => {
          if (['ELOOP', 'ENOTDIR', 'ENOENT'].includes(error.code ?? '')) throw new LostRace();
          throw error;
        });
        held.push(child);
        stack.push(child);
        continue;
      }
      if (isLast) return done(top, step.name);
      // A file on the way: nothing below it exists; creating there fails with ENOTDIR (a conflict).
      if (options.options.mustExist || queue.some((next) => next.fromLink)) throw new PathNotFoundError(userPath);
      const missing = [step.name, ...queue.map((next) => next.name)];
      return done(top, missing[missing.length - 1] as string, missing);
    }
    // The path ended on a directory reached through `..` or a symlink to a directory, or on the root.
    if (stack.length === 1) return done(null, null);
    const top = stack[stack.length - 1] as PinnedDirectory;
    return done(stack[stack.length - 2] as PinnedDirectory, path.basename(top.real));
  } catch (error) {
    await Promise.all(held.map((directory) => directory.close()));
    throw error;
  }
}

/** lchown to `owner` when the server may (root) and it is not already so. */
async function giveTo(at: string, owner: { uid: number; gid: number }): Promise<void> {
  if (process.geteuid?.() !== 0) return;
  const stats = await lstat(at);
  if (stats.uid !== owner.uid || stats.gid !== owner.gid) await lchown(at, owner.uid, owner.gid);
}

async function realWorkdir(workdir: string): Promise<string> {
  try {
    return await realpath(workdir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new PathNotFoundError('.', 'The workdir does not exist (it may have been deleted)');
    }
    throw error;
  }
}

function absoluteToSegments(options: { workdir: string; root: string; userPath: string; parsed: ParsedUserPath }): string[] {
  const normalized = path.join('/', ...options.parsed.segments);
  for (const base of [options.root, path.resolve(options.workdir)]) {
    if (isInsideRoot(base, normalized)) {
      return path.relative(base, normalized).split(path.sep).filter((segment) => segment !== '');
    }
  }
  throw new PathOutsideWorkdirError(options.userPath, 'absolute paths must lie inside the workdir');
}
