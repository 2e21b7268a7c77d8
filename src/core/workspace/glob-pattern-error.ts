/** A glob pattern that cannot be compiled (bad class, too many brace alternatives). HTTP: 400. */
export class GlobPatternError extends Error {
  readonly code = 'invalid_glob' as const;

  constructor(message: string) {
    super(message);
    this.name = 'GlobPatternError';
  }
}
