import { AppError } from '../errors.js';

/** A search regex the engine cannot compile. The grep tool reports it back to the model. HTTP: 400. */
export class SearchPatternError extends AppError {
  declare readonly code: 'invalid_search_pattern';

  constructor(message: string) {
    super({ code: 'invalid_search_pattern', status: 400, message });
    this.name = 'SearchPatternError';
  }
}
