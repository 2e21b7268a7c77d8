/** node's Stats in core's terms (EntryStats), and lstat that tolerates an entry vanishing. */
import type { Stats } from 'node:fs';
import { lstat } from 'node:fs/promises';
import type { EntryStats } from '../../core/workspace/file-entry-stats.js';

export function toEntryStats(stats: Stats): EntryStats {
  const type = stats.isSymbolicLink() ? 'symlink' : stats.isDirectory() ? 'directory' : stats.isFile() ? 'file' : 'other';
  return { type, size: stats.size, mtimeMs: stats.mtimeMs, ino: stats.ino };
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
