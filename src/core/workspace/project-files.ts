/**
 * The port through which core reads the project's own configuration around a workdir:
 * AGENTS.md / CLAUDE.md (also in the directories above it, up to the repository root),
 * `.mcp.json` and `.claude/settings*.json`. Which files count and what they mean is core's
 * (agent/project-instructions.ts, mcp/project-mcp-config.ts, permissions/project-settings.ts);
 * adapters/workspace/host-project-files.ts reads them, never blocking on a FIFO and never
 * following a symlink where a request says so.
 */
export interface ProjectFiles {
  /** The repository root: the nearest directory at or above `dir` that holds `.git`; null outside one. */
  gitRoot(dir: string): Promise<string | null>;
  /** Whether `name` exists in `dir` (a symlink counts when its target exists); for checks that must not wait. */
  exists(dir: string, name: string): boolean;
  /** Whether anything at all is at `name` in `dir`: a file, a directory, a symlink (dangling or not), something unreadable. */
  present(dir: string, name: string): boolean;
  /** The text of the file `name` (a relative path) in `dir`, or why there is none. */
  read(request: ProjectFileRequest): Promise<ProjectFileRead>;
  /** What is at an absolute path now, told apart without reading it (see FileStamp); null when nothing is. */
  stamp(file: string): FileStamp | null;
}

/**
 * An entry's identity and change times: `key` differs whenever its content, its entries (a
 * directory), its mode or what it is changed, and for a symlink whenever its target's does.
 * `changedMs` is the latest of its (and its target's) mtime and ctime: a change within the same
 * timestamp tick can leave `key` as it was, so a reader trusts only stamps older than a moment.
 */
export interface FileStamp {
  key: string;
  changedMs: number;
}

export interface ProjectFileRequest {
  dir: string;
  name: string;
  maxBytes: number;
  /** `cut`: a longer file gives its first `maxBytes` bytes; `refuse`: a longer file is refused. */
  oversize: 'cut' | 'refuse';
  /**
   * `never`: a symlink as the file's last component is refused (unreadable, ELOOP);
   * `inside`: followed when its target stays inside `dir` (`CLAUDE.md -> AGENTS.md`), refused otherwise.
   */
  symlinks: 'never' | 'inside';
}

export type ProjectFileRead =
  | { kind: 'text'; text: string }
  | { kind: 'missing' }
  /** Not a regular file, too large (with `refuse`), or a symlink leading out of `dir` (with `inside`). */
  | { kind: 'refused' }
  | { kind: 'unreadable'; message: string };
