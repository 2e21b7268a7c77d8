/**
 * Files in a conversation's workdir, as the HTTP Files routes see them: list, search, mkdir -p,
 * delete, open for download, and upload batches. Every client path goes through the workspace
 * resolver (`resolveInWorkdir`) first; nothing outside the workdir is read, written or listed.
 */
import { constants, type Stats } from 'node:fs';
import { mkdir, open, realpath, rm, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { ConflictError, InvalidRequestError } from '../errors.js';
import type { Page } from '../pagination.js';
import type { FileEntry } from '../schemas/file-entry.js';
import { lstatIfExists, toFileEntry } from './file-entry-stats.js';
import { InvalidPathError } from './invalid-path-error.js';
import { asWorkspaceError } from './workspace-fs-error.js';
import { compileSearchGlob } from './search-glob.js';
import { resolveInWorkdir, toWorkdirRelative, type ResolveOptions } from './resolve-path.js';
import { resumableWalk } from './resumable-walk.js';
import { UploadBatch } from './upload-batch.js';
import { collectWalkPage, decodeWalkCursor, encodeWalkCursor, queryFingerprint } from './walk-page.js';

export interface WorkspaceFilesOptions {
  /** The workdir of a conversation; throws NotFoundError for an unknown one. */
  workdirOf: (conversationId: string) => string;
  /** Entries a listing or search page examines at most before it stops short. Default 50,000. */
  pageBudget?: number;
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
  handle: FileHandle;
  name: string;
  size: number;
  mtimeMs: number;
}

const DEFAULT_PAGE_BUDGET = 50_000;
const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

export class WorkspaceFiles {
  constructor(private readonly options: WorkspaceFilesOptions) {}

  async list(conversationId: string, query: ListFilesQuery): Promise<Page<FileEntry>> {
    const { root, absolute } = await this.resolve(conversationId, query.path, { mustExist: true });
    const stats = await stat(absolute);
    if (!stats.isDirectory()) throw new InvalidRequestError('not_a_directory', `${JSON.stringify(query.path)} is not a directory.`, { path: query.path });
    const prefix = relativePrefix(root, absolute);
    const fingerprint = queryFingerprint({ op: 'list', dir: prefix, recursive: query.recursive });
    const page = await collectWalkPage({
      walk: resumableWalk({ start: absolute, recursive: query.recursive, after: decodeWalkCursor({ fingerprint, pageId: query.pageId }) }),
      limit: query.limit,
      budget: this.pageBudget,
      toItem: (item) => toFileEntry({ relativePath: prefix + item.relativePath, stats: item.stats }),
    });
    return { items: page.items, next_page_id: encodeWalkCursor({ fingerprint, resumeAfter: page.resumeAfter }) };
  }

  /** Glob over paths relative to the workdir (`src/**\/*.ts`); files, directories and symlinks that match. */
  async search(conversationId: string, query: SearchFilesQuery): Promise<Page<FileEntry>> {
    const glob = compileSearchGlob(query.pattern);
    const { root, absolute } = await this.resolve(conversationId, glob.base, {});
    if (glob.literal) await this.resolve(conversationId, query.pattern, {}); // a literal path may not go through an escaping symlink either
    const baseStats = await lstatIfExists(absolute);
    const fingerprint = queryFingerprint({ op: 'search', pattern: query.pattern });
    const after = decodeWalkCursor({ fingerprint, pageId: query.pageId });
    if (!baseStats?.isDirectory()) return { items: [], next_page_id: null };
    const prefix = relativePrefix(root, absolute);
    const page = await collectWalkPage({
      walk: resumableWalk({ start: absolute, recursive: true, maxDepth: glob.maxDepth, skipDirectory: glob.skipDirectory, after }),
      limit: query.limit,
      budget: this.pageBudget,
      toItem: (item) => (glob.matches(item.relativePath) ? toFileEntry({ relativePath: prefix + item.relativePath, stats: item.stats }) : undefined),
    });
    return { items: page.items, next_page_id: encodeWalkCursor({ fingerprint, resumeAfter: page.resumeAfter }) };
  }

  /** mkdir -p. `created` is false when the directory was already there. */
  async mkdir(conversationId: string, userPath: string): Promise<{ entry: FileEntry; created: boolean }> {
    if (userPath.trim() === '') throw new InvalidPathError(userPath, 'give the directory to create');
    const { root, absolute } = await this.resolve(conversationId, userPath, {});
    const existing = await lstatIfExists(absolute);
    if (existing && !existing.isDirectory()) {
      throw new ConflictError('not_a_directory', `${JSON.stringify(userPath)} exists and is not a directory.`, { path: userPath });
    }
    let created = false;
    if (!existing) {
      try {
        created = (await mkdir(absolute, { recursive: true })) !== undefined;
      } catch (error) {
        throw asWorkspaceError(error, userPath);
      }
    }
    return { entry: describe(root, absolute, await stat(absolute)), created };
  }

  /**
   * Deletes a file, a directory (with its contents) or a symlink itself (never its target).
   * The workdir root cannot be deleted. A symlink whose target leaves the workdir is refused
   * like any other escaping path.
   */
  async delete(conversationId: string, userPath: string): Promise<void> {
    const { root, absolute: entry } = await this.resolve(conversationId, userPath, { mustExist: true, keepFinalSymlink: true });
    if (entry === root) {
      throw new InvalidRequestError('workdir_root_not_deletable', 'The workdir itself cannot be deleted (delete the conversation with ?delete_workdir=true for that).', { path: userPath });
    }
    await resolveInWorkdir(root, userPath, { mustExist: true }); // a symlink leading out of the workdir is refused, not unlinked
    const stats = await lstatIfExists(entry);
    if (!stats) return;
    await rm(entry, { recursive: stats.isDirectory(), force: true }).catch((error: unknown) => {
      throw asWorkspaceError(error, userPath);
    });
  }

  /** Opens a regular file for reading (O_NOFOLLOW). The caller owns the handle. */
  async open(conversationId: string, userPath: string): Promise<OpenedFile> {
    const { absolute } = await this.resolve(conversationId, userPath, { mustExist: true });
    const checkRegular = (stats: Stats) => {
      if (stats.isDirectory()) throw new InvalidRequestError('is_a_directory', `${JSON.stringify(userPath)} is a directory; list it instead.`, { path: userPath });
      if (!stats.isFile()) throw new InvalidRequestError('not_a_regular_file', `${JSON.stringify(userPath)} is not a regular file.`, { path: userPath });
    };
    checkRegular(await stat(absolute)); // before open(): opening a FIFO could block
    const handle = await open(absolute, READ_FLAGS).catch((error: unknown) => {
      throw asWorkspaceError(error, userPath);
    });
    try {
      const stats = await handle.stat();
      checkRegular(stats);
      return { handle, name: path.basename(absolute), size: stats.size, mtimeMs: stats.mtimeMs };
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  /** Starts an upload into `directory` (created when missing). Commit or abort the batch. */
  async beginUpload(conversationId: string, directory: string): Promise<UploadBatch> {
    const { root, absolute } = await this.resolve(conversationId, directory, {});
    const existing = await lstatIfExists(absolute);
    if (existing && !existing.isDirectory()) {
      throw new ConflictError('not_a_directory', `Upload target ${JSON.stringify(directory)} exists and is not a directory.`, { path: directory });
    }
    let createdDirectory: string | undefined;
    if (!existing) {
      try {
        createdDirectory = await mkdir(absolute, { recursive: true });
      } catch (error) {
        throw asWorkspaceError(error, directory);
      }
    }
    return new UploadBatch({ root, directory: absolute, ...(createdDirectory ? { createdDirectory } : {}) });
  }

  private get pageBudget(): number {
    return this.options.pageBudget ?? DEFAULT_PAGE_BUDGET;
  }

  private async resolve(conversationId: string, userPath: string, options: ResolveOptions): Promise<{ root: string; absolute: string }> {
    const workdir = this.options.workdirOf(conversationId);
    const absolute = await resolveInWorkdir(workdir, userPath, options);
    return { root: await realpath(workdir), absolute };
  }
}

function relativePrefix(root: string, absolute: string): string {
  const relative = toWorkdirRelative(root, absolute);
  return relative === '.' ? '' : `${relative}/`;
}

function describe(root: string, absolute: string, stats: Stats): FileEntry {
  const relative = toWorkdirRelative(root, absolute);
  return toFileEntry({ relativePath: relative, stats }) as FileEntry;
}
