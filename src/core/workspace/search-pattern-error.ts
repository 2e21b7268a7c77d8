/** A search regex the engine cannot compile. The grep tool reports it back to the model. */
export class SearchPatternError extends Error {
  readonly code = 'invalid_search_pattern' as const;

  constructor(message: string) {
    super(message);
    this.name = 'SearchPatternError';
  }
}
