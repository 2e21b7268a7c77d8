import fs from 'node:fs';
import path from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { EMPTY_TREE, type ChangedPath } from '../../core/checkpoints/shadow-repository.js';
import { writeFileAtomic } from '../files/index.js';

/** zlib when a checkpoint is written or read: an import at the top would load it at every start. */
const zlib = () => process.getBuiltinModule('node:zlib');

/**
 * A checkpoint's git work that needs no git process (each one's start is paid on the path of the
 * tool call the checkpoint comes before): its commit written as a loose object, its branch
 * as a loose ref, and the paths that differ between two trees read from their loose objects. These
 * are git's plainest formats (loose objects and trees in gitformat-loose(5) and git-cat-file(1),
 * loose refs in gitrepository-layout(5)); each file is written to a temporary name and renamed,
 * so a reader sees it whole or not at all. Only for a repository in git's default formats (SHA-1
 * objects, refs as files: `inDefaultFormats`); a read that meets an object that is not loose
 * (packed by a `git gc`) answers null, and git is asked instead.
 */

/** Whether a repository keeps SHA-1 objects and refs as files (its config names no other format). */
export function inDefaultFormats(gitDir: string): boolean {
  let config: string;
  try {
    config = fs.readFileSync(path.join(gitDir, 'config'), 'utf8');
  } catch {
    return false;
  }
  return !/^\s*(objectformat|refstorage)\s*=/im.test(config);
}

/**
 * What `git init --template= --initial-branch=<branch>` makes of a `--git-dir` (a bare repository,
 * SHA-1 objects, refs in files): its directories, config and HEAD (written last: git takes a
 * directory with a HEAD for a repository). Not a git process per new shadow repository. What the
 * config leaves to git's probes of the filesystem (filemode, symlinks, case) every run of the
 * server's git sets anyway (git-program.ts: SAFE_CONFIG).
 */
export function initRepository(gitDir: string, branch: string): void {
  for (const dir of ['objects/info', 'objects/pack', 'refs/heads', 'refs/tags']) fs.mkdirSync(path.join(gitDir, dir), { recursive: true });
  fs.writeFileSync(path.join(gitDir, 'config'), '[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n', { mode: 0o644 });
  fs.writeFileSync(path.join(gitDir, 'HEAD'), `ref: refs/heads/${branch}\n`, { mode: 0o644 });
}

/** Writes a commit of `tree` (on `parent`, if any) by agentd with `message`; returns its id. */
export function writeCommit(gitDir: string, options: { tree: string; parent?: string | undefined; message: string; date: Date }): string {
  const seconds = Math.floor(options.date.getTime() / 1000);
  const signature = `agentd <agentd@localhost> ${seconds} +0000`;
  const body = [`tree ${options.tree}`, ...(options.parent ? [`parent ${options.parent}`] : []), `author ${signature}`, `committer ${signature}`, '', `${options.message}\n`].join('\n');
  return writeObject(gitDir, 'commit', Buffer.from(body, 'utf8'));
}

/** Points `ref` (e.g. `refs/heads/checkpoints`) at `id`. */
export function writeRef(gitDir: string, ref: string, id: string): void {
  const file = path.join(gitDir, ref);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  replaceFile(gitDir, file, `${id}\n`, 0o644);
}

function writeObject(gitDir: string, type: string, content: Buffer): string {
  const whole = Buffer.concat([Buffer.from(`${type} ${content.length}\0`), content]);
  const id = createHash('sha1').update(whole).digest('hex');
  const file = path.join(gitDir, 'objects', id.slice(0, 2), id.slice(2));
  // Objects are named by their content: one already there is this one.
  if (fs.existsSync(file)) return id;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  replaceFile(gitDir, file, zlib().deflateSync(whole), 0o444);
  return id;
}

/** Written beside the repository's own files (a crash leaves no half ref or object among them), then renamed into place. */
function replaceFile(gitDir: string, file: string, data: string | Buffer, mode: number): void {
  writeFileAtomic(file, data, { mode, exclusive: true, temp: path.join(gitDir, `agentd-write-${randomBytes(6).toString('hex')}.tmp`) });
}

/**
 * The paths that differ between two trees, as `git diff-tree -r --no-renames --name-status`
 * lists them (in its order); null when an object is not there as a loose object. Subtrees with
 * the same id on both sides are not read.
 */
export function diffTrees(gitDir: string, from: string, to: string): ChangedPath[] | null {
  const changes: ChangedPath[] = [];
  return walkDiff(gitDir, from, to, '', changes) ? changes : null;
}

interface TreeEntry {
  mode: string;
  name: string;
  id: string;
  isTree: boolean;
  /** Its place in git's tree order: a tree's name sorts as if it ended with `/`. */
  key: Buffer;
}

function walkDiff(gitDir: string, from: string | null, to: string | null, prefix: string, changes: ChangedPath[]): boolean {
  const before = from === null ? [] : readTree(gitDir, from);
  const after = to === null ? [] : readTree(gitDir, to);
  if (before === null || after === null) return false;
  let i = 0;
  let j = 0;
  while (i < before.length || j < after.length) {
    const order = i === before.length ? 1 : j === after.length ? -1 : Buffer.compare(before[i]!.key, after[j]!.key);
    const old = order <= 0 ? before[i++]! : null;
    const now = order >= 0 ? after[j++]! : null;
    const entry = (old ?? now)!;
    const path = `${prefix}${entry.name}`;
    if (entry.isTree) {
      if (old?.id === now?.id) continue;
      if (!walkDiff(gitDir, old?.id ?? null, now?.id ?? null, `${path}/`, changes)) return false;
    } else if (old === null) changes.push({ path, status: 'added' });
    else if (now === null) changes.push({ path, status: 'deleted' });
    else if (old.id !== now.id || old.mode !== now.mode) changes.push({ path, status: 'modified' });
  }
  return true;
}

/** A tree's entries in git's order, or null when it is not a loose object here. */
function readTree(gitDir: string, id: string): TreeEntry[] | null {
  if (id === EMPTY_TREE) return [];
  let raw: Buffer;
  try {
    raw = zlib().inflateSync(fs.readFileSync(path.join(gitDir, 'objects', id.slice(0, 2), id.slice(2))));
  } catch {
    return null;
  }
  const headerEnd = raw.indexOf(0);
  if (headerEnd < 0 || !raw.subarray(0, headerEnd).toString('latin1').startsWith('tree ')) return null;
  const entries: TreeEntry[] = [];
  let at = headerEnd + 1;
  while (at < raw.length) {
    const space = raw.indexOf(0x20, at);
    const nul = raw.indexOf(0, space);
    if (space < 0 || nul < 0 || nul + 21 > raw.length) return null;
    const mode = raw.subarray(at, space).toString('latin1');
    const nameBytes = raw.subarray(space + 1, nul);
    const isTree = mode === '40000';
    entries.push({ mode, name: nameBytes.toString('utf8'), id: raw.subarray(nul + 1, nul + 21).toString('hex'), isTree, key: isTree ? Buffer.concat([nameBytes, Buffer.from('/')]) : nameBytes });
    at = nul + 21;
  }
  return entries;
}
