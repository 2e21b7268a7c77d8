/**
 * Path handling shared by the file tools: every path goes through the pinning workspace resolver
 * (relative to the workdir, or absolute inside it), and known failures become results the
 * model can act on instead of exceptions. A tool call that reads or writes keeps its paths
 * pinned in a PinScope until it returns, and makes every filesystem call through them.
 */
import { GlobPatternError } from '../workspace/glob-pattern-error.js';
import { InvalidPathError } from '../workspace/invalid-path-error.js';
import { PathNotFoundError } from '../workspace/path-not-found-error.js';
import { PathOutsideWorkdirError } from '../workspace/path-outside-workdir-error.js';
import { toWorkdirRelative } from '../workspace/resolve-path.js';
import { SearchPatternError } from '../workspace/search-pattern-error.js';
import type { PinnedEntry } from '../workspace/workdir-file-system.js';
import type { ToolContext, ToolResult } from './tool.js';

export interface ToolPath {
  /** Real absolute path inside the workdir. */
  absolute: string;
  /** Relative to the workdir ('.' for the root), for messages. */
  relative: string;
  /** The workdir's real path. */
  root: string;
  /** The resolution, its directories held open while the scope lives (absent without a scope). */
  pinned?: PinnedEntry;
}

/** The paths a tool call holds pinned; released when the call ends. */
export class PinScope {
  private readonly pins: PinnedEntry[] = [];

  hold(pinned: PinnedEntry): PinnedEntry {
    this.pins.push(pinned);
    return pinned;
  }

  async release(): Promise<void> {
    await Promise.all(this.pins.splice(0).map((pinned) => pinned.release()));
  }
}

/** A path's pinned form for filesystem calls; only for a ToolPath resolved with a scope. */
export function pinnedOf(file: ToolPath): PinnedEntry {
  if (!file.pinned) throw new Error(`${file.relative} was resolved without a scope`);
  return file.pinned;
}

/** Resolves a tool's path; with a scope it stays pinned until the scope is released, else it is only checked. */
export async function resolveToolPath(
  context: Pick<ToolContext, 'workdir' | 'workdirFs'>,
  userPath: string,
  options: { mustExist?: boolean; scope?: PinScope } = {},
): Promise<ToolPath> {
  const pinned = await context.workdirFs.pin(context.workdir, userPath, { allowAbsolute: true, mustExist: options.mustExist ?? false });
  const file = { absolute: pinned.real, root: pinned.root, relative: toWorkdirRelative(pinned.root, pinned.real) };
  if (options.scope) return { ...file, pinned: options.scope.hold(pinned) };
  await pinned.release();
  return file;
}

const FS_ERROR_MESSAGES: Record<string, string> = {
  ENOENT: 'No such file or directory',
  EACCES: 'Permission denied',
  EPERM: 'Operation not permitted',
  EISDIR: 'Is a directory',
  ENOTDIR: 'A component of the path is a file, not a directory',
  ELOOP: 'Too many levels of symbolic links (or a symlink where a file was expected)',
  ENOSPC: 'No space left on device',
  EROFS: 'Read-only file system',
  ENAMETOOLONG: 'File name too long',
  EEXIST: 'File exists',
  EBUSY: 'Resource busy',
  EFBIG: 'The result would be too large for file_editor (5 MB limit); use bash for large files',
};

/**
 * Turns an expected failure into `{isError: true}` with a sentence the model can act on.
 * Anything unexpected (a programmer error) is rethrown.
 */
export function toolFailure(error: unknown, displayPath?: string): ToolResult {
  if (error instanceof PathOutsideWorkdirError || error instanceof InvalidPathError) {
    return {
      isError: true,
      content: `${error.message}. Use a path relative to the workdir, or an absolute path inside it; nothing outside the workdir can be accessed.`,
      data: { error: error.code },
    };
  }
  if (error instanceof PathNotFoundError || error instanceof GlobPatternError || error instanceof SearchPatternError) {
    return { isError: true, content: error.message, data: { error: error.code } };
  }
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (typeof code === 'string' && code in FS_ERROR_MESSAGES) {
    const where = displayPath ? `${displayPath}: ` : '';
    return { isError: true, content: `${where}${FS_ERROR_MESSAGES[code]} (${code})`, data: { error: code } };
  }
  throw error;
}
