import { AppError } from '../errors.js';

/** A search regex the engine cannot compile. The grep tool reports it back to the model. Kind `invalid`. */
export class SearchPatternError extends AppError {
  declare readonly code: 'invalid_search_pattern';

  constructor(message: string) {
    super({ code: 'invalid_search_pattern', kind: 'invalid', message });
    this.name = 'SearchPatternError';
  }
}
