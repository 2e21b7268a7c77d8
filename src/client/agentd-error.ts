import type { ErrorBody } from './types.js';

/**
 * An error answer of the server, typed: `code` is the contract's `error` field
 * (`conversation_not_found`, `run_in_progress`, ...), `status` the HTTP status.
 */
export class AgentdError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: Record<string, unknown> | null;

  constructor(status: number, body: ErrorBody) {
    super(body.message);
    this.name = 'AgentdError';
    this.status = status;
    this.code = body.error;
    this.details = body.details ?? null;
  }
}

/** The server could not be reached (or a stream could not be resumed within its budget). */
export class AgentdConnectionError extends Error {
  readonly code = 'connection_failed';

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AgentdConnectionError';
  }
}
