import { AppError } from '../errors.js';

/**
 * A path that is malformed or uses a form the server never accepts (NUL bytes, percent-encoded
 * separators or dots, backslashes, absolute paths where only relative ones are allowed...).
 * Kind `invalid`, code `invalid_path`.
 */
export class InvalidPathError extends AppError {
  declare readonly code: 'invalid_path';
  /** The path as the client or the model sent it (never a server path). */
  readonly userPath: string;

  constructor(userPath: string, reason: string) {
    super({
      code: 'invalid_path',
      kind: 'invalid',
      message: `Invalid path ${JSON.stringify(truncateForMessage(userPath))}: ${reason}`,
      details: { path: truncateForMessage(userPath) },
    });
    this.name = 'InvalidPathError';
    this.userPath = userPath;
  }
}

/** Keeps hostile inputs from blowing up logs and observations. */
export function truncateForMessage(value: string, max = 200): string {
  return value.length > max ? `${value.slice(0, max)}…` : value;
}
