/**
 * The two walks of a workdir, as core asks for them (adapters/workspace walks the disk): the
 * bounded walk of the glob tool, the JS grep and file_editor's directory view, and the
 * resumable walk behind the paged HTTP listing and search.
 */
import type { EntryStats } from './file-entry-stats.js';

export interface WalkEntry {
  /** Path inside the tree (for a symlink: the link's own path, not its target). */
  absolutePath: string;
  /** Relative to `start`, '/'-separated. */
  relativePath: string;
  name: string;
  type: 'file' | 'directory';
  size: number;
  mtimeMs: number;
  /** 1 for a direct child of `start`. */
  depth: number;
  symlink: boolean;
}

export type WalkLimit = 'max_entries' | 'max_depth';

/**
 * A bounded, depth-first walk in sorted pre-order (a directory, then its contents). Symlinks are
 * yielded only when their target is inside the root, and symlinked directories are never
 * descended (no loops, no escapes).
 */
export interface WalkOptions {
  /** The real workdir: nothing outside it is yielded or entered. */
  root: string;
  /** Real directory to walk (default: root). Must be inside root. */
  start?: string;
  /** Deepest level yielded (1 = direct children). Default 64. */
  maxDepth?: number;
  /** Directory entries examined before the walk stops. Default 200,000. */
  maxEntries?: number;
  /** Directories not entered nor yielded. Default: DEFAULT_SKIPPED_DIRECTORIES by name. */
  skipDirectory?: (name: string, relativePath: string) => boolean;
  /** Whether to enter a directory that was yielded. Default: always. */
  shouldDescend?: (entry: WalkEntry) => boolean;
  /** Yield and enter names starting with '.'. Default true. */
  includeHidden?: boolean;
  signal?: AbortSignal;
  /** Called once if the walk stops early because of a limit. */
  onLimit?: (limit: WalkLimit) => void;
}

export const DEFAULT_SKIPPED_DIRECTORIES: ReadonlySet<string> = new Set(['.git', 'node_modules']);

export interface ResumableWalkItem {
  /** Relative to the walked directory, '/'-separated. */
  relativePath: string;
  /** The entry's lstat: symlinks are yielded as themselves, never followed. */
  stats: EntryStats;
}

/**
 * A walk in sorted pre-order that can resume right after any path it yielded, even one deleted
 * since: it only reads the directories on the cursor's path, so a page costs O(page) stats.
 */
export interface ResumableWalkOptions {
  /** Segments of the last path yielded by a previous walk (relative to the walked directory): resume after it. */
  after?: readonly string[];
  /** Descend into directories. Default false (direct children only). */
  recursive?: boolean;
  /** Deepest level yielded (1 = direct children). Default 64. */
  maxDepth?: number;
  /** Directories yielded but not entered. */
  skipDirectory?: (name: string) => boolean;
}
