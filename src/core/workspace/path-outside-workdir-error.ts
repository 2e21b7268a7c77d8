import { AppError } from '../errors.js';
import { truncateForMessage } from './invalid-path-error.js';

/**
 * A well-formed path that would land outside the conversation's workdir: `..` climbing above
 * the root, an absolute path elsewhere, or a symlink whose target leaves the workdir.
 * Kind `forbidden`, code `path_outside_workdir`.
 */
export class PathOutsideWorkdirError extends AppError {
  declare readonly code: 'path_outside_workdir';
  readonly userPath: string;

  constructor(userPath: string, reason = 'it resolves outside the workdir') {
    super({
      code: 'path_outside_workdir',
      kind: 'forbidden',
      message: `Path ${JSON.stringify(truncateForMessage(userPath))} is not allowed: ${reason}`,
      details: { path: truncateForMessage(userPath) },
    });
    this.name = 'PathOutsideWorkdirError';
    this.userPath = userPath;
  }
}
