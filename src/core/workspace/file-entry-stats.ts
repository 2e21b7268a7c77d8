/** What the workdir's file system says about one entry (lstat), and the contract's FileEntry made from it. */
import path from 'node:path';
import { isoTimestamp } from '../clock.js';
import type { FileEntry, FileType } from '../schemas/file-entry.js';

/** An entry's lstat, in core's terms (adapters/workspace makes it from node's Stats). */
export interface EntryStats {
  /** `other` for sockets, fifos and devices (never listed). */
  type: FileType | 'other';
  size: number;
  mtimeMs: number;
  /** The inode number: with size and mtime, a file's version (file_editor notices writes by others). */
  ino: number;
}

/** file, directory or symlink; undefined for sockets, fifos and devices (never listed). */
export function fileTypeOf(stats: EntryStats): FileType | undefined {
  return stats.type === 'other' ? undefined : stats.type;
}

export function toFileEntry(options: { relativePath: string; stats: EntryStats }): FileEntry | undefined {
  const type = fileTypeOf(options.stats);
  if (!type) return undefined;
  const relativePath = options.relativePath === '' ? '.' : options.relativePath;
  return {
    name: relativePath === '.' ? '.' : path.posix.basename(relativePath),
    path: relativePath,
    type,
    size: options.stats.size,
    modified_at: isoTimestamp(options.stats.mtimeMs),
  };
}
