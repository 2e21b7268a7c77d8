/**
 * An upload batch (core/workspace/upload-batch.ts) on disk, all or nothing: each file is streamed to a temp file next to
 * its destination (opened O_EXCL|O_NOFOLLOW), and only `commit()` renames them into place.
 * `abort()` removes every temp file and every directory the batch created. File names are
 * resolved below the target directory by the workspace resolver: a name that climbs out of the
 * target directory, is absolute, encoded, or goes through a symlink leaving the workdir is
 * refused before anything is written. Every write, rename and removal goes through the
 * destination's directory held open since its resolution (pinned-directory.ts), so a directory
 * swapped for a symlink meanwhile cannot send a file elsewhere.
 */
import { randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { lstat, open, rename, unlink } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ConflictError, InvalidRequestError } from '../../core/errors.js';
import type { FileEntry } from '../../core/schemas/file-entry.js';
import { toFileEntry } from '../../core/workspace/file-entry-stats.js';
import type { UploadBatch, UploadBatchOptions } from '../../core/workspace/upload-batch.js';
import { toEntryStats } from './entry-stats.js';
import { pinInWorkdir } from './pin-path.js';
import { PinnedDirectory, removeEntry } from './pinned-directory.js';
import { asWorkspaceError } from '../../core/workspace/workspace-fs-error.js';
import { parseUserPath, toWorkdirRelative } from '../../core/workspace/resolve-path.js';

interface StagedFile {
  directory: PinnedDirectory;
  tempName: string;
  finalName: string;
  /** Real path of the destination. */
  finalPath: string;
}

const TEMP_OPEN_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

export class StagedUploadBatch implements UploadBatch {
  private readonly staged: StagedFile[] = [];
  /** Directories this batch made, as (pinned parent, name), in the order made. */
  private readonly createdDirectories: { parent: PinnedDirectory; name: string }[] = [];
  /** Every directory held open by the batch, by real path: one descriptor each. */
  private readonly directories = new Map<string, PinnedDirectory>();
  private readonly directoryRelative: string;

  constructor(private readonly options: UploadBatchOptions) {
    this.directoryRelative = toWorkdirRelative(options.root, options.directory);
  }

  get size(): number {
    return this.staged.length;
  }

  /** Streams one file to a temp file. Throws typed errors for refused names; `content` is then left unread. */
  async add(file: { name: string; content: Readable }): Promise<void> {
    const relative = this.relativeOf(file.name);
    const pinned = await pinInWorkdir(this.options.workdir, relative).catch((error: unknown) => {
      throw asWorkspaceError(error, file.name);
    });
    let directory: PinnedDirectory;
    let finalName: string;
    let owner: { uid: number; gid: number };
    try {
      const finalPath = pinned.real;
      if (finalPath === this.options.root || !finalPath.startsWith(`${this.options.directory}/`) || pinned.name === null) {
        throw new InvalidRequestError('invalid_file_name', `${JSON.stringify(file.name)} does not name a file inside the target directory.`, { name: file.name });
      }
      this.assertDistinct(file.name, finalPath);
      if (pinned.exists && (await lstat(pinned.at())).isDirectory()) {
        throw new ConflictError('path_is_directory', `Cannot upload ${JSON.stringify(file.name)}: a directory exists at that path.`, { name: file.name });
      }
      for (const { parent, name } of await pinned.ensureParent()) this.createdDirectories.push({ parent: await this.hold(parent), name });
      directory = await this.hold(pinned.parentDirectory as PinnedDirectory);
      finalName = pinned.name;
      owner = await pinned.owner();
    } catch (error) {
      throw asWorkspaceError(error, file.name);
    } finally {
      await pinned.release();
    }
    const tempName = `.agentd-upload-${randomUUID()}.part`;
    const handle = await open(directory.at(tempName), TEMP_OPEN_FLAGS, 0o644).catch((error: unknown) => {
      throw asWorkspaceError(error, file.name);
    });
    this.staged.push({ directory, tempName, finalName, finalPath: `${directory.real}/${finalName}` });
    // The agent's file, not root's (the server runs as root in a sandboxed setup).
    if (process.geteuid?.() === 0) {
      await handle.chown(owner.uid, owner.gid).catch(async (error: unknown) => {
        await handle.close();
        throw asWorkspaceError(error, file.name);
      });
    }
    await pipeline(file.content, handle.createWriteStream()).catch((error: unknown) => {
      throw asWorkspaceError(error, file.name);
    });
  }

  /**
   * One batch cannot write a path twice (the second would silently replace the first), nor make a
   * path both a file and the directory of another file (`a` and `a/b`).
   */
  private assertDistinct(name: string, finalPath: string): void {
    for (const { finalPath: other } of this.staged) {
      if (other === finalPath) {
        throw new InvalidRequestError('duplicate_upload_name', `${JSON.stringify(name)} appears more than once in this upload: send each path once.`, { name });
      }
      if (other.startsWith(`${finalPath}/`) || finalPath.startsWith(`${other}/`)) {
        const [file, inside] = other.startsWith(`${finalPath}/`) ? [finalPath, other] : [other, finalPath];
        throw new InvalidRequestError(
          'upload_path_conflict',
          `This upload makes ${JSON.stringify(toWorkdirRelative(this.options.root, file))} both a file and the directory of ${JSON.stringify(toWorkdirRelative(this.options.root, inside))}.`,
          { name },
        );
      }
    }
  }

  /** Moves every staged file into place and describes what was written. */
  async commit(): Promise<FileEntry[]> {
    const entries: FileEntry[] = [];
    try {
      for (const file of this.staged) {
        const relative = toWorkdirRelative(this.options.root, file.finalPath);
        await rename(file.directory.at(file.tempName), file.directory.at(file.finalName)).catch((error: unknown) => {
          throw asWorkspaceError(error, relative);
        });
        const entry = toFileEntry({ relativePath: relative, stats: toEntryStats(await lstat(file.directory.at(file.finalName))) }) as FileEntry;
        entries.push(this.options.describe ? this.options.describe(entry) : entry);
      }
      this.staged.length = 0;
      return entries;
    } finally {
      if (this.staged.length === 0) await this.closeAll();
    }
  }

  /** Leaves the workdir as it was: no temp file, no directory created by this batch. */
  async abort(): Promise<void> {
    await Promise.all(this.staged.map((file) => unlink(file.directory.at(file.tempName)).catch(() => undefined)));
    this.staged.length = 0;
    for (const { parent, name } of this.createdDirectories.reverse()) await removeEntry(parent, name).catch(() => undefined);
    this.createdDirectories.length = 0;
    await this.closeAll();
  }

  /** The client's file name as a path relative to the workdir, below the target directory. */
  private relativeOf(name: string): string {
    if (typeof name !== 'string' || name.trim() === '') throw new InvalidRequestError('invalid_file_name', 'Every uploaded file needs a file name.');
    const parsed = parseUserPath(name); // refuses absolute, encoded, NUL, backslashes and '..' climbing out of the target directory
    if (parsed.segments.length === 0) throw new InvalidRequestError('invalid_file_name', `${JSON.stringify(name)} is not a file name.`, { name });
    return [this.directoryRelative, ...parsed.segments].filter((segment) => segment !== '.').join('/');
  }

  /** A descriptor of the batch's own for `directory` (the pinned path's are released after each add). */
  private async hold(directory: PinnedDirectory): Promise<PinnedDirectory> {
    const known = this.directories.get(directory.real);
    if (known) return known;
    const own = await PinnedDirectory.open(directory.at('.'), directory.real);
    this.directories.set(directory.real, own);
    return own;
  }

  private async closeAll(): Promise<void> {
    await Promise.all([...this.directories.values()].map((directory) => directory.close()));
    this.directories.clear();
  }
}
