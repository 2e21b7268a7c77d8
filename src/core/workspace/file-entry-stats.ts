/** Turns what lstat says about an entry inside the workdir into the contract's FileEntry. */
import type { Stats } from 'node:fs';
import { lstat } from 'node:fs/promises';
import path from 'node:path';
import { isoTimestamp } from '../clock.js';
import type { FileEntry, FileType } from '../schemas/file-entry.js';

/** file, directory or symlink; undefined for sockets, fifos and devices (never listed). */
export function fileTypeOf(stats: Stats): FileType | undefined {
  if (stats.isSymbolicLink()) return 'symlink';
  if (stats.isDirectory()) return 'directory';
  if (stats.isFile()) return 'file';
  return undefined;
}

export function toFileEntry(options: { relativePath: string; stats: Stats }): FileEntry | undefined {
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

/** lstat, or undefined when the entry vanished meanwhile. */
export async function lstatIfExists(absolutePath: string): Promise<Stats | undefined> {
  try {
    return await lstat(absolutePath);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw error;
  }
}
