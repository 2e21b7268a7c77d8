import { AppError } from '../errors.js';

/** A glob pattern that cannot be compiled (bad class, too many brace alternatives). Kind `invalid`, code `invalid_glob`. */
export class GlobPatternError extends AppError {
  declare readonly code: 'invalid_glob';

  constructor(message: string) {
    super({ code: 'invalid_glob', kind: 'invalid', message });
    this.name = 'GlobPatternError';
  }
}
