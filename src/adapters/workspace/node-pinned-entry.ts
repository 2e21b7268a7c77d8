/**
 * A pinned path (pin-path.ts) as core's PinnedEntry: every filesystem call goes through the
 * directory held open by the resolution (`at()`), with O_NOFOLLOW or calls that never follow
 * the last component, so the check and the use cannot be separated by a swapped symlink.
 */
import { constants } from 'node:fs';
import { lstat, mkdir, open, unlink, type FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import type { EntryStats } from '../../core/workspace/file-entry-stats.js';
import type { ResumableWalkItem, ResumableWalkOptions } from '../../core/workspace/walk-entry.js';
import type { PinnedEntry, ReadableFile } from '../../core/workspace/workdir-file-system.js';
import { toEntryStats } from './entry-stats.js';
import { readBytesNoFollow, writeBytesNoFollow } from './no-follow-file-io.js';
import type { PinnedPath } from './pin-path.js';
import { removeEntry } from './pinned-directory.js';
import { resumableWalk } from './resumable-walk.js';

/** O_NONBLOCK: opening a FIFO cannot block; it is then refused as not a regular file. */
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

export class NodePinnedEntry implements PinnedEntry {
  constructor(private readonly pinned: PinnedPath) {}

  get root(): string {
    return this.pinned.root;
  }

  get real(): string {
    return this.pinned.real;
  }

  get name(): string | null {
    return this.pinned.name;
  }

  get exists(): boolean {
    return this.pinned.exists;
  }

  async stat(): Promise<EntryStats> {
    return toEntryStats(await lstat(this.pinned.at()));
  }

  readFile(maxBytes: number): Promise<{ bytes?: Buffer; size: number }> {
    return readBytesNoFollow(this.pinned.at(), maxBytes);
  }

  async ensureParent(): Promise<void> {
    await this.pinned.ensureParent();
  }

  async writeFile(data: Buffer | string): Promise<void> {
    await writeBytesNoFollow(this.pinned.at(), data, await this.pinned.owner());
  }

  async makeDirectory(): Promise<boolean> {
    await this.pinned.ensureParent();
    const created = await mkdir(this.pinned.at()).then(
      () => true,
      (error: NodeJS.ErrnoException) => {
        if (error.code === 'EEXIST') return false;
        throw error;
      },
    );
    if (created) await this.pinned.adopt();
    const directory = await this.pinned.openDirectory(); // never a symlink planted in its place meanwhile
    await directory.close();
    return created;
  }

  async unlink(): Promise<void> {
    await unlink(this.pinned.at());
  }

  async remove(): Promise<void> {
    const parent = this.pinned.parentDirectory;
    if (parent === null || this.pinned.name === null) throw new Error('the workdir itself is not removed through its pinned path');
    await removeEntry(parent, this.pinned.name);
  }

  async openForRead(): Promise<ReadableFile> {
    const handle = await open(this.pinned.at(), READ_FLAGS);
    try {
      return new NodeReadableFile(handle, toEntryStats(await handle.stat()));
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  async *walk(options: ResumableWalkOptions = {}): AsyncGenerator<ResumableWalkItem> {
    const start = await this.pinned.openDirectory();
    try {
      yield* resumableWalk({ ...options, start });
    } finally {
      await start.close();
    }
  }

  release(): Promise<void> {
    return this.pinned.release();
  }
}

class NodeReadableFile implements ReadableFile {
  constructor(
    private readonly handle: FileHandle,
    readonly stats: EntryStats,
  ) {}

  async read(into: Uint8Array, position: number): Promise<number> {
    const { bytesRead } = await this.handle.read(into, 0, into.length, position);
    return bytesRead;
  }

  stream(range: { start?: number; end?: number } = {}): Readable {
    return this.handle.createReadStream(range);
  }

  close(): Promise<void> {
    return this.handle.close();
  }
}
