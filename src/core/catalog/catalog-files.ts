/**
 * How the catalog reads a directory tree: the workdir (through the workspace guard, so a symlink
 * leading out of it is refused) or the server's skills directory. Paths are relative to the root.
 */
export interface CatalogFiles {
  /** The root's absolute path (for telling the agent where a skill's files are). */
  readonly root: string;
  /** Entries directly under `dir`; [] when it does not exist or is not a directory. */
  list(dir: string): Promise<{ name: string; type: 'file' | 'directory' | 'symlink' }[]>;
  /** A regular file's text; throws when it is missing, not a regular file, larger than `maxBytes`, or outside the root. */
  read(file: string, maxBytes: number): Promise<string>;
}
