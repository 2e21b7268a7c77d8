import { AppError } from '../errors.js';
import { truncateForMessage } from './invalid-path-error.js';

/** The path is allowed but nothing exists there (asked with `mustExist`). Kind `not_found`, code `path_not_found`. */
export class PathNotFoundError extends AppError {
  declare readonly code: 'path_not_found';
  readonly userPath: string;

  constructor(userPath: string, message?: string) {
    super({
      code: 'path_not_found',
      kind: 'not_found',
      message: message ?? `No such file or directory: ${JSON.stringify(truncateForMessage(userPath))}`,
      details: { path: truncateForMessage(userPath) },
    });
    this.name = 'PathNotFoundError';
    this.userPath = userPath;
  }
}
