import { truncateForMessage } from './invalid-path-error.js';

/**
 * A well-formed path that would land outside the conversation's workdir: `..` climbing above
 * the root, an absolute path elsewhere, or a symlink whose target leaves the workdir.
 * The HTTP layer maps `code` to 403.
 */
export class PathOutsideWorkdirError extends Error {
  readonly code = 'path_outside_workdir' as const;
  readonly userPath: string;

  constructor(userPath: string, reason = 'it resolves outside the workdir') {
    super(`Path ${JSON.stringify(truncateForMessage(userPath))} is not allowed: ${reason}`);
    this.name = 'PathOutsideWorkdirError';
    this.userPath = userPath;
  }
}
