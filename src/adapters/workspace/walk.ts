/**
 * The bounded, depth-first walk of a directory inside the workdir (core/workspace/walk-entry.ts),
 * used by the glob/grep tools and file_editor's directory view. Entries come in sorted
 * pre-order (a directory, then its contents). Symlinks are yielded only when their target is
 * inside the root, and symlinked directories are never descended (no loops, no escapes). Each
 * directory is held open while it is read and entered without following a symlink
 * (pinned-directory.ts), and a symlink's target is resolved by the pinning resolver: a
 * directory swapped for a symlink during the walk leads nowhere outside the root.
 */
import type { Dirent, Stats } from 'node:fs';
import { lstat, opendir } from 'node:fs/promises';
import path from 'node:path';
import { pinInWorkdir } from './pin-path.js';
import type { PinnedDirectory } from './pinned-directory.js';
import { isInsideRoot, toWorkdirRelative } from '../../core/workspace/resolve-path.js';
import { DEFAULT_SKIPPED_DIRECTORIES, type WalkEntry, type WalkOptions } from '../../core/workspace/walk-entry.js';

const DEFAULT_MAX_DEPTH = 64;
const DEFAULT_MAX_ENTRIES = 200_000;
const STAT_BATCH = 64;

interface WalkState {
  examined: number;
  stopped: boolean;
  depthLimited: boolean;
}

export async function* walkDirectory(options: WalkOptions): AsyncGenerator<WalkEntry> {
  const start = options.start ?? options.root;
  if (!isInsideRoot(options.root, start)) return;
  const pinned = await pinInWorkdir(options.root, toWorkdirRelative(options.root, start), { mustExist: true }).catch(() => undefined);
  const directory = pinned?.exists ? await pinned.openDirectory().catch(() => undefined) : undefined;
  await pinned?.release();
  if (!directory) return;
  try {
    const state: WalkState = { examined: 0, stopped: false, depthLimited: false };
    yield* walkLevel({ options, state, directory, logical: start, relativePrefix: '', depth: 1 });
    if (state.depthLimited && !state.stopped) options.onLimit?.('max_depth');
  } finally {
    await directory.close();
  }
}

async function* walkLevel(level: {
  options: WalkOptions;
  state: WalkState;
  directory: PinnedDirectory;
  /** The directory's path inside the root, as reached (for entries' absolutePath). */
  logical: string;
  relativePrefix: string;
  depth: number;
}): AsyncGenerator<WalkEntry> {
  const { options, state, directory, logical, relativePrefix, depth } = level;
  const maxDepth = options.maxDepth ?? DEFAULT_MAX_DEPTH;
  const maxEntries = options.maxEntries ?? DEFAULT_MAX_ENTRIES;
  const skipDirectory = options.skipDirectory ?? ((name: string) => DEFAULT_SKIPPED_DIRECTORIES.has(name));
  if (options.signal?.aborted || state.stopped) return;

  const dirents = await readSorted(directory.at(), maxEntries + 1);
  const visible = options.includeHidden === false ? dirents.filter((dirent) => !dirent.name.startsWith('.')) : dirents;
  const examined = visible.slice(0, Math.max(maxEntries - state.examined, 0));
  state.examined += examined.length;
  for (let offset = 0; offset < examined.length; offset += STAT_BATCH) {
    // Stat a batch of entries concurrently, then yield them in order.
    const batch = await Promise.all(
      examined
        .slice(offset, offset + STAT_BATCH)
        .map((dirent) => describe({ root: options.root, directory, logical, dirent, relativePath: relativePrefix + dirent.name, depth })),
    );
    for (const entry of batch) {
      if (options.signal?.aborted || state.stopped) return;
      if (!entry) continue;
      if (entry.type === 'directory' && skipDirectory(entry.name, entry.relativePath)) continue;
      yield entry;
      if (entry.type !== 'directory' || entry.symlink) continue;
      if (options.shouldDescend && !options.shouldDescend(entry)) continue;
      if (depth >= maxDepth) {
        state.depthLimited = true;
        continue;
      }
      const child = await directory.openChild(entry.name).catch(() => undefined); // swapped for a symlink meanwhile: skipped
      if (!child) continue;
      try {
        yield* walkLevel({ options, state, directory: child, logical: entry.absolutePath, relativePrefix: `${entry.relativePath}/`, depth: depth + 1 });
      } finally {
        await child.close();
      }
    }
  }
  if (examined.length < visible.length && !state.stopped) {
    state.stopped = true;
    options.onLimit?.('max_entries');
  }
}

async function readSorted(directory: string, limit: number): Promise<Dirent[]> {
  const dirents: Dirent[] = [];
  try {
    for await (const dirent of await opendir(directory)) {
      dirents.push(dirent);
      if (dirents.length >= limit) break;
    }
  } catch {
    return dirents; // unreadable (EACCES) or vanished meanwhile: skip it
  }
  return dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

async function describe(item: {
  root: string;
  directory: PinnedDirectory;
  logical: string;
  dirent: Dirent;
  relativePath: string;
  depth: number;
}): Promise<WalkEntry | undefined> {
  const { root, directory, logical, dirent, relativePath, depth } = item;
  const absolutePath = path.join(logical, dirent.name);
  const symlink = dirent.isSymbolicLink();
  if (!symlink && !dirent.isFile() && !dirent.isDirectory()) return undefined; // sockets, fifos, devices
  let stats: Stats;
  try {
    stats = symlink ? await statLinkTarget(root, path.join(directory.real, dirent.name)) : await lstat(directory.at(dirent.name));
  } catch {
    return undefined; // dangling link, loop, outside the root, or removed meanwhile
  }
  if (!stats.isFile() && !stats.isDirectory()) return undefined;
  return {
    absolutePath,
    relativePath,
    name: dirent.name,
    type: stats.isDirectory() ? 'directory' : 'file',
    size: stats.size,
    mtimeMs: stats.mtimeMs,
    depth,
    symlink,
  };
}

/** The stats of what a symlink inside the root leads to, resolved by the pinning resolver (throws when it leaves the root). */
async function statLinkTarget(root: string, link: string): Promise<Stats> {
  const pinned = await pinInWorkdir(root, toWorkdirRelative(root, link), { mustExist: true });
  try {
    return await lstat(pinned.at());
  } finally {
    await pinned.release();
  }
}
