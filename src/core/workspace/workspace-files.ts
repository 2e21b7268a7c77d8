/**
 * Files in a conversation's workdir, as the HTTP Files routes see them: list, search, mkdir -p,
 * delete, open for download, and upload batches. Every client path is pinned first
 * (WorkdirFileSystem.pin): each call then goes through the directories held open by the
 * resolution, so nothing outside the workdir is read, written or listed, even while the agent
 * swaps a directory for a symlink in a loop.
 */
import { ConflictError, InvalidRequestError } from '../errors.js';
import type { Page } from '../pagination.js';
import type { FileEntry } from '../schemas/file-entry.js';
import { toFileEntry } from './file-entry-stats.js';
import { InvalidPathError } from './invalid-path-error.js';
import { asWorkspaceError } from './workspace-fs-error.js';
import { compileSearchGlob } from './search-glob.js';
import { toWorkdirRelative, type ResolveOptions } from './resolve-path.js';
import type { UploadBatch } from './upload-batch.js';
import { collectWalkPage, decodeWalkCursor, encodeWalkCursor, queryFingerprint } from './walk-page.js';
import type { PinnedEntry, ReadableFile, WorkdirFileSystem } from './workdir-file-system.js';

export interface WorkspaceFilesOptions {
  /** The workdirs on disk, every path confined to its workdir. */
  workdirFs: WorkdirFileSystem;
  /** The workdir of a conversation; throws NotFoundError for an unknown one. */
  workdirOf: (conversationId: string) => string;
  /** Entries a listing or search page examines at most before it stops short. Default 50,000. */
  pageBudget?: number;
  /** Masks the conversation's secret values in a text (here: file names and paths). Default: none. */
  maskText?: (conversationId: string, text: string) => string;
}

export interface ListFilesQuery {
  path: string;
  recursive: boolean;
  pageId?: string | undefined;
  limit: number;
}

export interface SearchFilesQuery {
  pattern: string;
  pageId?: string | undefined;
  limit: number;
}

export interface OpenedFile {
  handle: ReadableFile;
  name: string;
  size: number;
  mtimeMs: number;
}

const DEFAULT_PAGE_BUDGET = 50_000;

export class WorkspaceFiles {
  constructor(private readonly options: WorkspaceFilesOptions) {}

  async list(conversationId: string, query: ListFilesQuery): Promise<Page<FileEntry>> {
    return this.withPinned(conversationId, query.path, { mustExist: true }, async (pinned) => {
      const stats = await pinned.stat();
      if (stats.type !== 'directory') throw new InvalidRequestError('not_a_directory', `${JSON.stringify(query.path)} is not a directory.`, { path: query.path });
      const prefix = relativePrefix(pinned.root, pinned.real);
      const fingerprint = queryFingerprint({ op: 'list', dir: prefix, recursive: query.recursive });
      const after = decodeWalkCursor({ fingerprint, pageId: query.pageId });
      const page = await collectWalkPage({
        walk: pinned.walk({ recursive: query.recursive, after }),
        limit: query.limit,
        budget: this.pageBudget,
        toItem: (item) => this.masked(conversationId, toFileEntry({ relativePath: prefix + item.relativePath, stats: item.stats })),
      });
      return { items: page.items, next_page_id: encodeWalkCursor({ fingerprint, resumeAfter: page.resumeAfter }) };
    });
  }

  /** Glob over paths relative to the workdir (`src/**\/*.ts`); files, directories and symlinks that match. */
  async search(conversationId: string, query: SearchFilesQuery): Promise<Page<FileEntry>> {
    const glob = compileSearchGlob(query.pattern);
    if (glob.literal) await this.withPinned(conversationId, query.pattern, {}, async () => undefined); // a literal path may not go through an escaping symlink either
    return this.withPinned(conversationId, glob.base, {}, async (pinned) => {
      const fingerprint = queryFingerprint({ op: 'search', pattern: query.pattern });
      const after = decodeWalkCursor({ fingerprint, pageId: query.pageId });
      const baseStats = pinned.exists ? await pinned.stat().catch(() => undefined) : undefined;
      if (baseStats?.type !== 'directory') return { items: [], next_page_id: null };
      const prefix = relativePrefix(pinned.root, pinned.real);
      const page = await collectWalkPage({
        walk: pinned.walk({ recursive: true, maxDepth: glob.maxDepth, skipDirectory: glob.skipDirectory, after }),
        limit: query.limit,
        budget: this.pageBudget,
        toItem: (item) => (glob.matches(item.relativePath) ? this.masked(conversationId, toFileEntry({ relativePath: prefix + item.relativePath, stats: item.stats })) : undefined),
      });
      return { items: page.items, next_page_id: encodeWalkCursor({ fingerprint, resumeAfter: page.resumeAfter }) };
    });
  }

  /** mkdir -p. `created` is false when the directory was already there. */
  async mkdir(conversationId: string, userPath: string): Promise<{ entry: FileEntry; created: boolean }> {
    if (userPath.trim() === '') throw new InvalidPathError(userPath, 'give the directory to create');
    return this.withPinned(conversationId, userPath, {}, async (pinned) => {
      if (pinned.exists && (await pinned.stat()).type !== 'directory') {
        throw new ConflictError('not_a_directory', `${JSON.stringify(userPath)} exists and is not a directory.`, { path: userPath });
      }
      const created = await pinned.makeDirectory();
      const entry = toFileEntry({ relativePath: toWorkdirRelative(pinned.root, pinned.real), stats: await pinned.stat() }) as FileEntry;
      return { entry: this.masked(conversationId, entry), created };
    });
  }

  /**
   * Deletes a file, a directory (with its contents) or a symlink itself (never its target).
   * The workdir root cannot be deleted. A symlink whose target leaves the workdir is refused
   * like any other escaping path. A directory's contents are removed one pinned directory at a
   * time: a subdirectory swapped for a symlink meanwhile is unlinked, never entered.
   */
  async delete(conversationId: string, userPath: string): Promise<void> {
    await this.withPinned(conversationId, userPath, { mustExist: true, keepFinalSymlink: true }, async (pinned) => {
      if (pinned.name === null) {
        throw new InvalidRequestError('workdir_root_not_deletable', 'The workdir itself cannot be deleted (delete the conversation with ?delete_workdir=true for that).', { path: userPath });
      }
      await this.withPinned(conversationId, userPath, { mustExist: true }, async () => undefined); // a symlink leading out of the workdir is refused, not unlinked
      await pinned.remove();
    });
  }

  /** Opens a regular file for reading (O_NOFOLLOW, through its pinned directory). The caller owns the handle. */
  async open(conversationId: string, userPath: string): Promise<OpenedFile> {
    return this.withPinned(conversationId, userPath, { mustExist: true }, async (pinned) => {
      const handle = await pinned.openForRead().catch((error: unknown) => {
        throw asWorkspaceError(error, userPath);
      });
      try {
        const { stats } = handle;
        if (stats.type === 'directory') throw new InvalidRequestError('is_a_directory', `${JSON.stringify(userPath)} is a directory; list it instead.`, { path: userPath });
        if (stats.type !== 'file') throw new InvalidRequestError('not_a_regular_file', `${JSON.stringify(userPath)} is not a regular file.`, { path: userPath });
        return { handle, name: pinned.name ?? '.', size: stats.size, mtimeMs: stats.mtimeMs };
      } catch (error) {
        await handle.close();
        throw error;
      }
    });
  }

  /**
   * Reads a whole regular file of at most `maxBytes` (a message's image): its bytes and its path
   * relative to the workdir. `tooLarge` says what to throw when it is bigger.
   */
  async readSmallFile(conversationId: string, userPath: string, options: { maxBytes: number; tooLarge: (size: number) => Error }): Promise<{ bytes: Buffer; path: string; mtimeMs: number }> {
    const opened = await this.open(conversationId, userPath);
    try {
      if (opened.size > options.maxBytes) throw options.tooLarge(opened.size);
      const bytes = Buffer.alloc(opened.size);
      let offset = 0;
      while (offset < bytes.length) {
        const bytesRead = await opened.handle.read(bytes.subarray(offset), offset);
        if (bytesRead === 0) break;
        offset += bytesRead;
      }
      const workdir = this.options.workdirOf(conversationId);
      const relative = await this.options.workdirFs.pin(workdir, userPath, { mustExist: true }).then(async (pinned) => {
        await pinned.release();
        return toWorkdirRelative(pinned.root, pinned.real);
      });
      return { bytes: bytes.subarray(0, offset), path: relative, mtimeMs: opened.mtimeMs };
    } finally {
      await opened.handle.close();
    }
  }

  /** Starts an upload into `directory` (created when missing). Commit or abort the batch. */
  async beginUpload(conversationId: string, directory: string): Promise<UploadBatch> {
    const workdir = this.options.workdirOf(conversationId);
    return this.withPinned(conversationId, directory, {}, async (pinned) => {
      if (pinned.exists && (await pinned.stat()).type !== 'directory') {
        throw new ConflictError('not_a_directory', `Upload target ${JSON.stringify(directory)} exists and is not a directory.`, { path: directory });
      }
      return this.options.workdirFs.beginUpload({ workdir, root: pinned.root, directory: pinned.real, describe: (entry) => this.masked(conversationId, entry) });
    });
  }

  /** A secret value in a file's name never leaves the server: masked like everywhere else. */
  private masked<T extends FileEntry | undefined>(conversationId: string, entry: T): T {
    const mask = this.options.maskText;
    if (!mask || !entry) return entry;
    return { ...entry, name: mask(conversationId, entry.name), path: mask(conversationId, entry.path) };
  }

  private get pageBudget(): number {
    return this.options.pageBudget ?? DEFAULT_PAGE_BUDGET;
  }

  /** Runs `use` on the pinned path, releasing it after; filesystem failures become typed errors. */
  private async withPinned<T>(conversationId: string, userPath: string, options: ResolveOptions, use: (pinned: PinnedEntry) => Promise<T>): Promise<T> {
    const workdir = this.options.workdirOf(conversationId);
    const pinned = await this.options.workdirFs.pin(workdir, userPath, options).catch((error: unknown) => {
      throw asWorkspaceError(error, userPath);
    });
    try {
      return await use(pinned);
    } catch (error) {
      throw asWorkspaceError(error, userPath);
    } finally {
      await pinned.release();
    }
  }
}

function relativePrefix(root: string, absolute: string): string {
  const relative = toWorkdirRelative(root, absolute);
  return relative === '.' ? '' : `${relative}/`;
}
