import { AppError, ConflictError } from '../errors.js';
import { InvalidPathError } from './invalid-path-error.js';

/**
 * Filesystem failures a client can cause or act on, as typed errors instead of 500s:
 * a file where a directory is needed (`not_a_directory`, a conflict), a permission problem
 * (`permission_denied`, forbidden), a symlink swapped in under an O_NOFOLLOW open (`invalid_path`),
 * a full disk (`insufficient_storage`). Anything else is returned unchanged.
 */
export function asWorkspaceError(error: unknown, userPath: string): unknown {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const details = { path: userPath };
  switch (code) {
    case 'ENOTDIR':
    case 'EEXIST':
      return new ConflictError('not_a_directory', `A component of ${JSON.stringify(userPath)} is a file, not a directory.`, details);
    case 'EACCES':
    case 'EPERM':
      return new AppError({ code: 'permission_denied', kind: 'forbidden', message: `The server may not access ${JSON.stringify(userPath)} (permission denied).`, details });
    case 'ELOOP':
      return new InvalidPathError(userPath, 'it is (or became) a symlink where a file was expected');
    case 'ENOSPC':
    case 'EDQUOT':
      return new AppError({ code: 'insufficient_storage', kind: 'storage_full', message: 'No space left on the device holding the workdir.', details });
    default:
      return error;
  }
}
