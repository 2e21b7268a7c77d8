/**
 * The port through which core reaches a conversation's workdir on disk: the file tools, the
 * HTTP files service, uploads and commands' cwd all go through it, never through node:fs.
 * Its one implementation (adapters/workspace/node-workdir-file-system.ts) confines every access
 * to the workdir: a path is resolved with each directory held open and symlinks expanded by
 * hand (their targets must stay inside), and every call then goes through the pinned parent,
 * so a directory swapped for a symlink meanwhile cannot redirect it (see pin-path.ts there).
 * Path syntax and its typed errors are core's (resolve-path.ts).
 */
import type { Readable } from 'node:stream';
import type { EntryStats } from './file-entry-stats.js';
import type { ResolveOptions } from './resolve-path.js';
import type { UploadBatch, UploadBatchOptions } from './upload-batch.js';
import type { ResumableWalkItem, ResumableWalkOptions, WalkEntry, WalkOptions } from './walk-entry.js';

export interface WorkdirFileSystem {
  /**
   * Resolves `userPath` in `workdir` and holds it pinned; release() it when done. Missing
   * trailing components are allowed (for create, mkdir and upload) unless `mustExist`.
   * Throws InvalidPathError, PathOutsideWorkdirError, PathNotFoundError.
   */
  pin(workdir: string, userPath: string, options?: ResolveOptions): Promise<PinnedEntry>;
  /** The real path `userPath` resolves to (nothing held). For checks whose use cannot be pinned, like a command's cwd. */
  resolve(workdir: string, userPath: string, options?: ResolveOptions): Promise<string>;
  /** The bounded walk of the glob tool and file_editor's directory view. */
  walk(options: WalkOptions): AsyncGenerator<WalkEntry>;
  /** An upload into `directory` (a real path inside `root`, created as files need it). */
  beginUpload(options: UploadBatchOptions): UploadBatch;
}

/** A resolved path, its parent directory held open: every call below goes through it. */
export interface PinnedEntry {
  /** The workdir's real path. */
  readonly root: string;
  /** The entry's real path (for messages and relative names). */
  readonly real: string;
  /** The entry's name in its parent; null for the workdir itself. */
  readonly name: string | null;
  /** False when the entry (or a directory above it) does not exist yet. */
  readonly exists: boolean;
  /** The entry's lstat (a symlink kept with `keepFinalSymlink` is described as itself). */
  stat(): Promise<EntryStats>;
  /** The file's bytes, or only its size when it is larger than `maxBytes`; never through a symlink (ELOOP). */
  readFile(maxBytes: number): Promise<{ bytes?: Buffer; size: number }>;
  /** Creates the missing directories above the entry, each pinned as it is made and given to the workdir's owner. */
  ensureParent(): Promise<void>;
  /** Writes the file (create or truncate, never through a symlink), owned by the workdir's owner, without set-id bits. */
  writeFile(data: Buffer | string): Promise<void>;
  /** mkdir -p of the entry, checked to be a directory afterwards; true when this call made it. */
  makeDirectory(): Promise<boolean>;
  /** Unlinks a file or symlink (not a directory). */
  unlink(): Promise<void>;
  /** Removes the entry and, for a directory, everything below it, never entering a symlink. */
  remove(): Promise<void>;
  /** Opens a file for reading without following a symlink or blocking on a FIFO; the caller closes it. */
  openForRead(): Promise<ReadableFile>;
  /** The directory's entries (a resumable walk); the directory is held open until the walk ends. */
  walk(options?: ResumableWalkOptions): AsyncGenerator<ResumableWalkItem>;
  release(): Promise<void>;
}

/** An open file (never a symlink's target): read it, stream a range of it, close it. */
export interface ReadableFile {
  /** What was opened (fstat): a directory, FIFO or device shows here. */
  readonly stats: EntryStats;
  /** Reads at most `into.length` bytes at `position`; returns how many were read. */
  read(into: Uint8Array, position: number): Promise<number>;
  /** The bytes from `start` to `end` (inclusive); the file closes when the stream ends. */
  stream(range?: { start?: number; end?: number }): Readable;
  close(): Promise<void>;
}
