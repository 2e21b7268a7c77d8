import type { Socket } from 'node:net';
import type { ConnectionError, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from 'fastify-type-provider-zod';
import { AppError, StorageFullError } from '../../core/errors.js';
import { statusOf } from '../http-error.js';

/** node:http's reason phrases, from its CommonJS exports: an ES module import of it loads Node's own undici (server-bundle.test.ts). */
const REASON_PHRASES = process.getBuiltinModule('node:http').STATUS_CODES;

/** Fastify's own 4xx errors, as the contract's machine codes. */
const FRAMEWORK_CODES: Record<string, string> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload_too_large',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_INVALID_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'invalid_content_length',
  FST_ERR_CTP_INVALID_TYPE: 'invalid_content_type',
  FST_REQ_FILE_TOO_LARGE: 'payload_too_large',
  FST_FILES_LIMIT: 'payload_too_large',
  FST_PARTS_LIMIT: 'payload_too_large',
  FST_INVALID_MULTIPART_CONTENT_TYPE: 'unsupported_media_type',
  FST_ERR_BAD_URL: 'invalid_url',
};

const STATUS_CODES: Record<number, string> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  406: 'not_acceptable',
  408: 'request_timeout',
  409: 'conflict',
  413: 'payload_too_large',
  414: 'uri_too_long',
  415: 'unsupported_media_type',
  422: 'unprocessable_entity',
  429: 'too_many_requests',
  431: 'headers_too_large',
};

export interface ErrorBody {
  error: string;
  message: string;
  details: Record<string, unknown> | null;
}

/** The one place errors become HTTP responses. A 5xx never carries a stack, a path or a secret. */
export function registerErrorHandling(app: FastifyInstance, unavailable: (error: unknown) => AppError | null = () => null): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    // A store that could not be reached (the database down) is a 503 to retry, not a 500.
    const translated = unavailable(error);
    const { status, body } = toErrorResponse(translated ?? error, { contentType: request.headers['content-type'] });
    if (status >= 500 && status !== 503) request.log.error({ err: error }, 'request failed');
    else if (status === 503) request.log.warn({ code: body.error, err: translated ? error : undefined }, 'request answered 503');
    else request.log.debug({ code: body.error }, 'request rejected');
    // Every 503 says when to come back: the error's own figure, else a second.
    if (status === 503) void reply.header('retry-after', String(retryAfterOf(body.details)));
    return reply.code(status).type('application/json').send(body);
  });

  app.setNotFoundHandler((request, reply) => {
    return reply.code(404).send({
      error: 'route_not_found',
      message: `No route ${request.method} ${request.url.split('?')[0]}.`,
      details: null,
    } satisfies ErrorBody);
  });
}

function retryAfterOf(details: Record<string, unknown> | null): number {
  const seconds = details?.retry_after_s;
  return typeof seconds === 'number' && Number.isFinite(seconds) && seconds >= 1 ? Math.ceil(seconds) : 1;
}

/**
 * For Fastify's `frameworkErrors` option: errors the router raises before any route or hook runs
 * (a malformed URL, an over-long path parameter) get the same shape as every other error.
 */
export function frameworkErrorHandler(error: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  const { status, body } = toErrorResponse(error);
  void reply.code(status).type('application/json').send(body);
}

/**
 * For Fastify's `clientErrorHandler` option: what Node's HTTP parser refuses before Fastify sees a
 * request (a request line and headers past the size limit, bytes that are not HTTP, a request too
 * slow to arrive) is answered in the same error shape too, then the connection is closed.
 */
export function clientErrorHandler(error: ConnectionError, socket: Socket): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, body]: [number, ErrorBody] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? [408, { error: 'request_timeout', message: 'The request took too long to arrive.', details: null }]
    : error.code === 'HPE_HEADER_OVERFLOW' ? [431, { error: 'headers_too_large', message: 'The request line and headers are larger than the server accepts.', details: null }]
    : [400, { error: 'bad_request', message: 'The request is not valid HTTP.', details: null }];
  // As Node's own handler: when a response to this connection's request has begun (an early 401
  // before a body that then turned out malformed), that response stands; a second one would follow it.
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && inFlight?.headersSent !== true) {
    const text = JSON.stringify(body);
    socket.write(`HTTP/1.1 ${status} ${REASON_PHRASES[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`);
  }
  socket.destroy(error);
}

export function toErrorResponse(error: FastifyError | AppError, request: { contentType?: string | undefined } = {}): { status: number; body: ErrorBody } {
  // A write no store translated (e.g. into a workdir on the same full disk) is still a 507, not a 500.
  if (!(error instanceof AppError) && ['ENOSPC', 'EDQUOT'].includes((error as { code?: unknown }).code as string)) return toErrorResponse(new StorageFullError());
  if (error instanceof AppError) {
    return { status: statusOf(error), body: { error: error.code, message: error.message, details: error.details } };
  }
  if (hasZodFastifySchemaValidationErrors(error)) {
    const issues = error.validation.slice(0, MAX_ISSUES).map((issue) => ({
      path: issue.instancePath.split('/').filter(Boolean).map((segment) => clip(segment)),
      code: issue.keyword,
      message: issue.message === undefined ? undefined : clip(clipQuotes(issue.message), MAX_MESSAGE),
    }));
    const omitted = error.validation.length - issues.length;
    const where = error.validationContext ?? 'request';
    const first = issues[0];
    const at = first && first.path.length > 0 ? ` at ${first.path.join('.')}` : '';
    return {
      status: 400,
      body: { error: 'validation_error', message: `Invalid ${where}${at}: ${first?.message ?? 'invalid input'}.`, details: { location: where, issues, ...(omitted > 0 ? { omitted_issues: omitted } : {}) } },
    };
  }
  if (!(error instanceof Error) || isResponseSerializationError(error as never) || !error.statusCode || error.statusCode >= 500) {
    return { status: 500, body: { error: 'internal_error', message: 'An internal error occurred.', details: null } };
  }
  const status = error.statusCode;
  const code = FRAMEWORK_CODES[error.code] ?? STATUS_CODES[status] ?? 'bad_request';
  if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return { status, body: { error: code, message: unsupportedMediaType(request.contentType), details: { accepted: ['application/json', 'multipart/form-data'] } } };
  if (error.code === 'FST_INVALID_MULTIPART_CONTENT_TYPE') {
    return { status, body: { error: code, message: 'Unsupported Media Type: send the files as multipart/form-data (curl -F file=@name).', details: { accepted: ['multipart/form-data'] } } };
  }
  return { status, body: { error: code, message: sentence(error.message), details: null } };
}

/**
 * A validation message can quote what was sent (zod names an unknown key; a path names a record's
 * key): each is clipped, and at most MAX_ISSUES are listed, so that an error never echoes a body
 * back (a huge key was once answered twice over: in the message and in the issue's).
 */
const MAX_ISSUES = 20;
const MAX_QUOTED = 200;
/** An issue's message: several keys (`Unrecognized keys: "a", "b", ...`), each clipped, then the whole. */
const MAX_MESSAGE = 1000;

function clip(text: string, max = MAX_QUOTED): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length.toLocaleString('en-US')} characters)`;
}

/**
 * Each quoted part of a message clipped, quotes paired in order. Found with indexOf, not a regular
 * expression: V8 ran `"([^"]{201,})"` over a huge key slowly enough to stall the request.
 */
function clipQuotes(message: string): string {
  let clipped = '';
  let from = 0;
  for (;;) {
    const open = message.indexOf('"', from);
    const close = open < 0 ? -1 : message.indexOf('"', open + 1);
    if (close < 0) return clipped + message.slice(from);
    clipped += `${message.slice(from, open + 1)}${clip(message.slice(open + 1, close))}"`;
    from = close + 1;
  }
}

/** Says what was sent and what to send instead. */
function unsupportedMediaType(sent: string | undefined): string {
  const what = sent ? ` (${sent.replace(/[^\x20-\x7e]/g, '').slice(0, 100)})` : '';
  return `Unsupported Media Type${what}: send the body as JSON with Content-Type: application/json (file uploads: multipart/form-data).`;
}

function sentence(message: string): string {
  const trimmed = message.trim().slice(0, 300);
  return trimmed.endsWith('.') ? trimmed : `${trimmed}.`;
}
