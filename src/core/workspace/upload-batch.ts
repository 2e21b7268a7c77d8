import type { Readable } from 'node:stream';
import type { FileEntry } from '../schemas/file-entry.js';

/**
 * Files uploaded in one request, all or nothing: `add` stages each file, only `commit()` puts
 * them in place, and `abort()` leaves the workdir as it was (no temp file, no directory the
 * batch made). File names are paths below the batch's directory, refused with typed errors when
 * they are absolute, encoded, climb out, or go through a symlink leaving the workdir.
 * adapters/workspace/staged-upload-batch.ts writes them.
 */
export interface UploadBatch {
  /** Files staged so far. */
  readonly size: number;
  /** Streams one file to its staging place. Throws typed errors for refused names; `content` is then left unread. */
  add(file: { name: string; content: Readable }): Promise<void>;
  /** Moves every staged file into place and describes what was written. */
  commit(): Promise<FileEntry[]>;
  /** Leaves the workdir as it was. */
  abort(): Promise<void>;
}

export interface UploadBatchOptions {
  /** The conversation's workdir. */
  workdir: string;
  /** The workdir's real path. */
  root: string;
  /** Real path of the directory the files go into (inside root). */
  directory: string;
  /** How a written file is described to the client (secret values in names masked). */
  describe?: (entry: FileEntry) => FileEntry;
}
