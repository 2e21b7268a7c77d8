import { AppError, type ErrorKind } from '../core/errors.js';

/** The HTTP status of each domain error kind: the one place core's errors meet status codes. */
const STATUS_OF_KIND: Record<ErrorKind, number> = {
  invalid: 400,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  unprocessable: 422,
  storage_full: 507,
  too_large: 413,
};

/** An error only the HTTP layer can have (a body too large, a range outside the file): it names its status. */
export class HttpError extends AppError {
  readonly status: number;

  constructor(options: { code: string; status: number; message: string; details?: Record<string, unknown> | null }) {
    super({ code: options.code, kind: 'invalid', message: options.message, details: options.details ?? null });
    this.name = 'HttpError';
    this.status = options.status;
  }
}

export function statusOf(error: AppError): number {
  return error instanceof HttpError ? error.status : STATUS_OF_KIND[error.kind];
}
