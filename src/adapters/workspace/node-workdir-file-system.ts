/**
 * The workdir file system core asks for (core/workspace/workdir-file-system.ts), on the local
 * disk: paths pinned by pin-path.ts, walks that never leave the root (walk.ts,
 * resumable-walk.ts), uploads staged beside their destination (staged-upload-batch.ts).
 */
import type { ResolveOptions } from '../../core/workspace/resolve-path.js';
import type { UploadBatch, UploadBatchOptions } from '../../core/workspace/upload-batch.js';
import type { WalkEntry, WalkOptions } from '../../core/workspace/walk-entry.js';
import type { PinnedEntry, WorkdirFileSystem } from '../../core/workspace/workdir-file-system.js';
import { NodePinnedEntry } from './node-pinned-entry.js';
import { pinInWorkdir, resolveInWorkdir } from './pin-path.js';
import { StagedUploadBatch } from './staged-upload-batch.js';
import { walkDirectory } from './walk.js';

export class NodeWorkdirFileSystem implements WorkdirFileSystem {
  async pin(workdir: string, userPath: string, options: ResolveOptions = {}): Promise<PinnedEntry> {
    return new NodePinnedEntry(await pinInWorkdir(workdir, userPath, options));
  }

  resolve(workdir: string, userPath: string, options: ResolveOptions = {}): Promise<string> {
    return resolveInWorkdir(workdir, userPath, options);
  }

  walk(options: WalkOptions): AsyncGenerator<WalkEntry> {
    return walkDirectory(options);
  }

  beginUpload(options: UploadBatchOptions): UploadBatch {
    return new StagedUploadBatch(options);
  }
}
