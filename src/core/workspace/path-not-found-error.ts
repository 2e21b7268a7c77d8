import { truncateForMessage } from './invalid-path-error.js';

/** The path is allowed but nothing exists there (asked with `mustExist`). HTTP: 404. */
export class PathNotFoundError extends Error {
  readonly code = 'path_not_found' as const;
  readonly userPath: string;

  constructor(userPath: string, message?: string) {
    super(message ?? `No such file or directory: ${JSON.stringify(truncateForMessage(userPath))}`);
    this.name = 'PathNotFoundError';
    this.userPath = userPath;
  }
}
