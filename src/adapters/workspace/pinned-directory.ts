/**
 * Directories held open while the server works in them. A path such as `/proc/self/fd/17/name`
 * names `name` inside the directory that descriptor 17 holds: the kernel jumps straight to that
 * directory, so swapping a directory on the way for a symlink (a racing `rename`) cannot redirect
 * the call. With O_NOFOLLOW (or lstat/unlink/rmdir/rename, which never follow the last
 * component) not even `name` itself can be a link. Linux only, like the rest of the server.
 */
import { constants } from 'node:fs';
import { lstat, open, readdir, rmdir, unlink, type FileHandle } from 'node:fs/promises';

const DIRECTORY_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

export class PinnedDirectory {
  private constructor(
    private readonly handle: FileHandle,
    /** The directory's real path when it was opened (for names and messages only). */
    readonly real: string,
  ) {}

  /** Opens `path` as a directory; fails with ELOOP or ENOTDIR when its last component is not one. */
  static async open(path: string, real: string): Promise<PinnedDirectory> {
    return new PinnedDirectory(await open(path, DIRECTORY_FLAGS), real);
  }

  /** Opens the child directory `name` without following a symlink there. */
  async openChild(name: string): Promise<PinnedDirectory> {
    return PinnedDirectory.open(this.at(name), `${this.real === '/' ? '' : this.real}/${name}`);
  }

  /** The directory itself (no name) or an entry of it, for any filesystem call. */
  at(name?: string): string {
    return name === undefined ? `/proc/self/fd/${this.handle.fd}` : `/proc/self/fd/${this.handle.fd}/${name}`;
  }

  async close(): Promise<void> {
    await this.handle.close().catch(() => undefined);
  }
}

/**
 * Removes the entry `name` of `parent` and, for a directory, everything below it, one pinned
 * directory at a time: a subdirectory swapped for a symlink meanwhile is unlinked as a link,
 * never entered.
 */
export async function removeEntry(parent: PinnedDirectory, name: string): Promise<void> {
  const stats = await lstat(parent.at(name)).catch(ignoreMissing);
  if (!stats) return;
  if (!stats.isDirectory()) {
    await unlink(parent.at(name)).catch(ignoreMissing);
    return;
  }
  let directory: PinnedDirectory;
  try {
    directory = await parent.openChild(name);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ELOOP' || code === 'ENOTDIR') return unlink(parent.at(name)).catch(ignoreMissing);
    if (code === 'ENOENT') return;
    throw error;
  }
  try {
    for (const child of await readdir(directory.at())) await removeEntry(directory, child);
  } finally {
    await directory.close();
  }
  await rmdir(parent.at(name)).catch(ignoreMissing);
}

function ignoreMissing(error: unknown): undefined {
  if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
  throw error;
}
