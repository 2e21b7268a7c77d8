/**
 * A path that is malformed or uses a form the server never accepts (NUL bytes, percent-encoded
 * separators or dots, backslashes, absolute paths where only relative ones are allowed...).
 * The HTTP layer maps `code` to 400.
 */
export class InvalidPathError extends Error {
  readonly code = 'invalid_path' as const;
  /** The path as the client or the model sent it (never a server path). */
  readonly userPath: string;

  constructor(userPath: string, reason: string) {
    super(`Invalid path ${JSON.stringify(truncateForMessage(userPath))}: ${reason}`);
    this.name = 'InvalidPathError';
    this.userPath = userPath;
  }
}

/** Keeps hostile inputs from blowing up logs and observations. */
export function truncateForMessage(value: string, max = 200): string {
  return value.length > max ? `${value.slice(0, max)}…` : value;
}
