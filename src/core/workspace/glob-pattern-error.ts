import { AppError } from '../errors.js';

/** A glob pattern that cannot be compiled (bad class, too many brace alternatives). HTTP: 400 `invalid_glob`. */
export class GlobPatternError extends AppError {
  declare readonly code: 'invalid_glob';

  constructor(message: string) {
    super({ code: 'invalid_glob', status: 400, message });
    this.name = 'GlobPatternError';
  }
}
