/**
 * Errors are typed values with stable machine codes. Core throws them; the HTTP layer maps them
 * to the contract's error shape in exactly one place (src/http/plugins/errors.ts).
 */
export type ErrorCode = string;

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly details: Record<string, unknown> | null;

  constructor(options: { code: ErrorCode; status: number; message: string; details?: Record<string, unknown> | null }) {
    super(options.message);
    this.name = 'AppError';
    this.code = options.code;
    this.status = options.status;
    this.details = options.details ?? null;
  }
}

export class NotFoundError extends AppError {
  constructor(what: string, id: string) {
    super({ code: `${what}_not_found`, status: 404, message: `No ${what.replace(/_/g, ' ')} with id ${id}.`, details: { id } });
  }
}

export class ConflictError extends AppError {
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super({ code, status: 409, message, details: details ?? null });
  }
}

export class InvalidRequestError extends AppError {
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super({ code, status: 400, message, details: details ?? null });
  }
}

export class UnprocessableError extends AppError {
  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>) {
    super({ code, status: 422, message, details: details ?? null });
  }
}
