import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { syncDirectory } from './sync-directory.js';

/** How a file is replaced: each caller keeps the durability it needs, nothing more. */
export interface AtomicWriteOptions {
  /** The new file's mode (the temp file is created with it); the process default when absent. */
  mode?: number;
  /** The bytes fsynced before the rename: the new content survives power loss, not only a crash. */
  fsync?: boolean;
  /** The directory fsynced after the rename: the new name survives power loss too. */
  syncDirectory?: boolean;
  /** The temp file's path; beside the file with a random name when absent. */
  temp?: string;
  /** The temp file must not exist yet (`wx`): never write through a file placed there by someone else. */
  exclusive?: boolean;
}

/** What the async form writes: the whole content, or a writer streaming it to the open temp file. */
export type AtomicContent = string | Uint8Array | ((handle: FileHandle) => Promise<void>);

/**
 * `file` replaced whole or not at all: written to a temp file, then renamed over it, so a crash
 * leaves the old content or the new, never half of one. On failure the temp file goes and the
 * error is thrown as it came.
 */
export function writeFileAtomic(file: string, content: string | Uint8Array, options: AtomicWriteOptions = {}): void {
  const temp = options.temp ?? tempBeside(file);
  try {
    const fd = fs.openSync(temp, options.exclusive ? 'wx' : 'w', options.mode);
    try {
      fs.writeFileSync(fd, content);
      if (options.fsync) fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, file);
  } catch (error) {
    fs.rmSync(temp, { force: true });
    throw error;
  }
  if (options.syncDirectory) syncDirectory(path.dirname(file));
}

/** writeFileAtomic off the event loop; `content` may be a writer that streams to the temp file. */
export async function writeFileAtomicAsync(file: string, content: AtomicContent, options: AtomicWriteOptions = {}): Promise<void> {
  const temp = options.temp ?? tempBeside(file);
  try {
    const handle = await fs.promises.open(temp, options.exclusive ? 'wx' : 'w', options.mode);
    try {
      if (typeof content === 'function') await content(handle);
      else await handle.writeFile(content);
      if (options.fsync) await handle.sync();
    } finally {
      await handle.close();
    }
    await fs.promises.rename(temp, file);
  } catch (error) {
    await fs.promises.rm(temp, { force: true });
    throw error;
  }
  if (options.syncDirectory) syncDirectory(path.dirname(file));
}

function tempBeside(file: string): string {
  return `${file}.${randomBytes(6).toString('hex')}.tmp`;
}
