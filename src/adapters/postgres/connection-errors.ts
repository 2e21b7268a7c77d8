import { AppError, DatabaseUnavailableError } from '../../core/errors.js';

/** Node's socket errors when the database's address does not answer. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
/** postgres.js's own codes for a connection that could not be made or went away. */
const DRIVER_CODES = new Set(['CONNECT_TIMEOUT', 'CONNECTION_CLOSED', 'CONNECTION_ENDED', 'CONNECTION_DESTROYED']);
/** SQLSTATEs of a server shutting down or refusing connections (57P01-57P03), besides class 08. */
const SERVER_GOING_AWAY = new Set(['57P01', '57P02', '57P03']);

/** Whether an error says the database could not be reached (as opposed to a query it refused). */
export function isConnectionError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code !== 'string') return false;
  return SOCKET_CODES.has(code) || DRIVER_CODES.has(code) || SERVER_GOING_AWAY.has(code) || /^08[0-9A-Z]{3}$/.test(code);
}

/** The contract's 503 for a connection-level error; null for anything else. */
export function asDatabaseUnavailable(error: unknown): AppError | null {
  return !(error instanceof AppError) && isConnectionError(error) ? new DatabaseUnavailableError() : null;
}
