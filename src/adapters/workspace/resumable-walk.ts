/**
 * A depth-first walk in sorted pre-order (a directory, then its contents) that can resume right
 * after any path it yielded, even one deleted since: it descends along the cursor's segments and
 * only reads the directories on that path. This is what makes the HTTP listing and search pages
 * cost O(page) stats instead of O(tree). Entries are lstat'ed: symlinks are yielded as
 * themselves and never followed or descended, and each directory is opened without following
 * a symlink and read through its descriptor (pinned-directory.ts), so the walk cannot leave the
 * start directory even when a directory is swapped for a symlink while it runs.
 */
import type { Stats } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { fileTypeOf } from '../../core/workspace/file-entry-stats.js';
import type { ResumableWalkItem, ResumableWalkOptions } from '../../core/workspace/walk-entry.js';
import { lstatIfExists, toEntryStats } from './entry-stats.js';
import type { PinnedDirectory } from './pinned-directory.js';

export interface ResumableWalkFrom extends ResumableWalkOptions {
  /** The directory to walk, held open (the caller closes it after the walk). */
  start: PinnedDirectory;
}

const DEFAULT_MAX_DEPTH = 64;

interface Level {
  options: ResumableWalkFrom;
  directory: PinnedDirectory;
  prefix: string;
  depth: number;
  after: readonly string[];
}

export async function* resumableWalk(options: ResumableWalkFrom): AsyncGenerator<ResumableWalkItem> {
  yield* walkLevel({ options, directory: options.start, prefix: '', depth: 1, after: options.after ?? [] });
}

async function* walkLevel(level: Level): AsyncGenerator<ResumableWalkItem> {
  const { options, directory, prefix, depth, after } = level;
  const names = await sortedNames(directory.at());
  let startIndex = 0;
  const [cursorName, ...cursorRest] = after;
  if (cursorName !== undefined) {
    startIndex = firstIndexNotBefore(names, cursorName);
    if (names[startIndex] === cursorName) {
      // The cursor is this entry or lies below it: finish its subtree first, then its siblings.
      const stats = await lstatIfExists(directory.at(cursorName));
      if (stats && canDescend({ options, name: cursorName, stats, depth })) {
        yield* descend({ options, parent: directory, name: cursorName, prefix: `${prefix}${cursorName}/`, depth: depth + 1, after: cursorRest });
      }
      startIndex += 1;
    }
  }
  for (let index = startIndex; index < names.length; index++) {
    const name = names[index] as string;
    const stats = await lstatIfExists(directory.at(name));
    const described = stats && toEntryStats(stats);
    if (!stats || !described || !fileTypeOf(described)) continue;
    yield { relativePath: prefix + name, stats: described };
    if (canDescend({ options, name, stats, depth })) {
      yield* descend({ options, parent: directory, name, prefix: `${prefix}${name}/`, depth: depth + 1, after: [] });
    }
  }
}

/** Walks the child directory `name`, opened without following a symlink; one swapped in meanwhile is skipped. */
async function* descend(level: Omit<Level, 'directory'> & { parent: PinnedDirectory; name: string }): AsyncGenerator<ResumableWalkItem> {
  const { parent, name, ...rest } = level;
  const directory = await parent.openChild(name).catch(() => undefined);
  if (!directory) return;
  try {
    yield* walkLevel({ ...rest, directory });
  } finally {
    await directory.close();
  }
}

function canDescend(entry: { options: ResumableWalkFrom; name: string; stats: Stats; depth: number }): boolean {
  const { options, name, stats, depth } = entry;
  if (!options.recursive || !stats.isDirectory()) return false;
  if (depth >= (options.maxDepth ?? DEFAULT_MAX_DEPTH)) return false;
  return !options.skipDirectory?.(name);
}

async function sortedNames(directory: string): Promise<string[]> {
  try {
    return (await readdir(directory)).sort(compareNames);
  } catch {
    return []; // unreadable (EACCES) or removed meanwhile
  }
}

function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Index of the first name >= `name` in a sorted list (binary search). */
function firstIndexNotBefore(names: readonly string[], name: string): number {
  let low = 0;
  let high = names.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if ((names[middle] as string) < name) low = middle + 1;
    else high = middle;
  }
  return low;
}
