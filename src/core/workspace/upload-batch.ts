/**
 * Files uploaded in one request, all or nothing: each file is streamed to a temp file next to
 * its destination (opened O_EXCL|O_NOFOLLOW), and only `commit()` renames them into place.
 * `abort()` removes every temp file and every directory the batch created. File names are
 * resolved below the target directory by the workspace resolver: a name that climbs out of the
 * target directory, is absolute, encoded, or goes through a symlink leaving the workdir is
 * refused before anything is written.
 */
import { randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ConflictError, InvalidRequestError } from '../errors.js';
import type { FileEntry } from '../schemas/file-entry.js';
import { lstatIfExists, toFileEntry } from './file-entry-stats.js';
import { asWorkspaceError } from './workspace-fs-error.js';
import { parseUserPath, resolveInWorkdir, toWorkdirRelative } from './resolve-path.js';

export interface UploadBatchOptions {
  /** The workdir's real path. */
  root: string;
  /** Real directory the files go into (inside root; exists). */
  directory: string;
  /** Set when the batch created `directory` (or an ancestor): removed again on abort. */
  createdDirectory?: string;
}

interface StagedFile {
  tempPath: string;
  finalPath: string;
}

const TEMP_OPEN_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW;

export class UploadBatch {
  private readonly staged: StagedFile[] = [];
  private readonly createdDirectories: string[] = [];
  private readonly directoryRelative: string;

  constructor(private readonly options: UploadBatchOptions) {
    this.directoryRelative = toWorkdirRelative(options.root, options.directory);
    if (options.createdDirectory) this.createdDirectories.push(options.createdDirectory);
  }

  get size(): number {
    return this.staged.length;
  }

  /** Streams one file to a temp file. Throws typed errors for refused names; `content` is then left unread. */
  async add(file: { name: string; content: Readable }): Promise<void> {
    const finalPath = await this.destinationOf(file.name);
    this.assertDistinct(file.name, finalPath);
    const existing = await lstatIfExists(finalPath);
    if (existing?.isDirectory()) {
      throw new ConflictError('path_is_directory', `Cannot upload ${JSON.stringify(file.name)}: a directory exists at that path.`, { name: file.name });
    }
    const created = await mkdir(path.dirname(finalPath), { recursive: true }).catch((error: unknown) => {
      throw asWorkspaceError(error, file.name);
    });
    if (created) this.createdDirectories.push(created);
    const tempPath = path.join(path.dirname(finalPath), `.agentd-upload-${randomUUID()}.part`);
    const handle = await open(tempPath, TEMP_OPEN_FLAGS, 0o644).catch((error: unknown) => {
      throw asWorkspaceError(error, file.name);
    });
    this.staged.push({ tempPath, finalPath });
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
    for (const file of this.staged) {
      await rename(file.tempPath, file.finalPath).catch((error: unknown) => {
        throw asWorkspaceError(error, toWorkdirRelative(this.options.root, file.finalPath));
      });
      entries.push(toFileEntry({ relativePath: toWorkdirRelative(this.options.root, file.finalPath), stats: await stat(file.finalPath) }) as FileEntry);
    }
    this.staged.length = 0;
    return entries;
  }

  /** Leaves the workdir as it was: no temp file, no directory created by this batch. */
  async abort(): Promise<void> {
    await Promise.all(this.staged.map((file) => rm(file.tempPath, { force: true }).catch(() => undefined)));
    this.staged.length = 0;
    for (const directory of this.createdDirectories.reverse()) await rm(directory, { recursive: true, force: true }).catch(() => undefined);
    this.createdDirectories.length = 0;
  }

  /** The real destination of a client-supplied file name, below the target directory. */
  private async destinationOf(name: string): Promise<string> {
    if (typeof name !== 'string' || name.trim() === '') throw new InvalidRequestError('invalid_file_name', 'Every uploaded file needs a file name.');
    const parsed = parseUserPath(name); // refuses absolute, encoded, NUL, backslashes and '..' climbing out of the target directory
    if (parsed.segments.length === 0) throw new InvalidRequestError('invalid_file_name', `${JSON.stringify(name)} is not a file name.`, { name });
    const relative = [this.directoryRelative, ...parsed.segments].filter((segment) => segment !== '.').join('/');
    const finalPath = await resolveInWorkdir(this.options.root, relative);
    if (finalPath === this.options.root || !finalPath.startsWith(this.options.directory + path.sep)) {
      throw new InvalidRequestError('invalid_file_name', `${JSON.stringify(name)} does not name a file inside the target directory.`, { name });
    }
    return finalPath;
  }
}
