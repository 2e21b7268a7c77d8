/**
 * Errors are typed values with stable machine codes and a domain kind. Core throws them and
 * knows nothing of HTTP; the HTTP layer maps each kind to a status and the contract's error
 * shape in exactly one place (src/http/error-status.ts, src/http/plugins/errors.ts).
 */
export type ErrorCode = string;

/** What went wrong, in the domain's words: the HTTP layer picks the status from it. */
export type ErrorKind =
  | 'invalid' // the request or an argument is malformed
  | 'forbidden' // well-formed but not allowed (a path outside the workdir, a permission)
  | 'not_found'
  | 'conflict' // the state does not allow it now (a run in progress, damaged data)
  | 'unprocessable' // understood but cannot be acted on (a secret the conversation lacks)
  | 'too_large' // a part of the request is over its size limit (an image)
  | 'storage_full' // nothing was stored: the disk is full
  | 'unavailable'; // a store or another instance did not answer in time: retry later

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly kind: ErrorKind;
  readonly details: Record<string, unknown> | null;

  constructor(options: { code: ErrorCode; kind: ErrorKind; message: string; details?: Record<string, unknown> | null }) {
    super(options.message);
    this.name = 'AppError';
    this.code = options.code;
    this.kind = options.kind;
    this.details = options.details ?? null;
  }
}

export class NotFoundError extends AppError {
  constructor(what: string, id: string) {
    super({ code: `${what}_not_found`, kind: 'not_found', message: `No ${what.replace(/_/g, ' ')} with id ${id}.`, details: { id } });
  }
}

export class ConflictError extends AppError {
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super({ code, kind: 'conflict', message, details: details ?? null });
  }
}

export class InvalidRequestError extends AppError {
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super({ code, kind: 'invalid', message, details: details ?? null });
  }
}

export class UnprocessableError extends AppError {
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super({ code, kind: 'unprocessable', message, details: details ?? null });
  }
}

/** Where stored data is damaged: a file (named relative to its owner's directory), the line when known, and what is wrong. */
export interface Damage {
  file: string;
  line: number | null;
  reason: string;
}

/**
 * Stored data that cannot be read back as written (not crash damage, which is repaired on load).
 * Thrown by the stores; what it belongs to is quarantined: kept for inspection, never written.
 */
export class DamagedDataError extends AppError {
  readonly damage: Damage;

  /** `path`: the full path, for the server's log only (never in a response). */
  constructor(
    damage: Damage,
    readonly path: string,
  ) {
    super({ code: 'data_damaged', kind: 'conflict', message: `Stored data is damaged: ${describeDamage(damage)}.`, details: { ...damage } });
    this.damage = damage;
  }
}

export function describeDamage(damage: Damage): string {
  return `${damage.file}${damage.line === null ? '' : ` line ${damage.line}`}: ${damage.reason}`;
}

/** A conversation whose stored data is damaged: readable as a summary, deletable, nothing else. */
export class ConversationQuarantinedError extends AppError {
  constructor(id: string, damage: Damage) {
    super({
      code: 'conversation_quarantined',
      kind: 'conflict',
      message: `Conversation ${id} is quarantined because its stored data is damaged (${describeDamage(damage)}); an operator must repair or delete it.`,
      details: { id, ...damage },
    });
  }
}

/** The data dir's filesystem is full (ENOSPC, EDQUOT): nothing was written; retry when space is freed. */
export class StorageFullError extends AppError {
  constructor() {
    super({ code: 'insufficient_storage', kind: 'storage_full', message: 'The server is out of disk space: nothing was stored. Retry once space is freed.' });
  }
}

/**
 * The database did not answer (stopped, unreachable, restarting): nothing was read or confirmed;
 * the client retries after `details.retry_after_s` (the Retry-After header).
 */
export class DatabaseUnavailableError extends AppError {
  constructor(message = 'The database is unreachable; retry the request later.', retryAfterS = 2) {
    super({ code: 'database_unavailable', kind: 'unavailable', message, details: { retry_after_s: retryAfterS } });
  }
}
