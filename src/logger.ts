import pino, { type Logger } from 'pino';
import { TurnBatchedOutput } from './perf/turn-batched-output.js';

/** Fields censored wherever they appear in a log record, whatever their value. */
const REDACTED_KEYS = new Set(['authorization', 'api_key', 'apiKey', 'secret', 'secrets', 'masterKeys']);

/**
 * Fields the server fills itself (ids, numbers, route patterns, the client's address): they
 * cannot carry text derived from a secret, so they are not scanned for secret values.
 */
const SERVER_KEYS = new Set(['reqId', 'conversation_id', 'method', 'route', 'status', 'ms', 'ip', 'level', 'time', 'service']);

/** How deep and how wide a logged value is walked (as pino's own limits); the rest is left out. */
const MAX_DEPTH = 5;
const MAX_KEYS = 100;

const ACCESS_TOKEN = /access_token=/i;

/** A URL as logged: `access_token` (SSE's query-string key) never reaches a log line. */
export function loggableUrl(url: string): string {
  // Only a query string can carry it: most URLs have none.
  return url.indexOf('?') !== -1 && ACCESS_TOKEN.test(url) ? url.replace(/([?&]access_token=)[^&]*/gi, '$1[redacted]') : url;
}

/** Replaces every secret value held by any conversation in a piece of text. */
export interface LogMasker {
  mask(text: string): string;
}

export interface LoggerOptions {
  level: string;
  /** Where lines go (default: stdout as JSON lines; `terminalDestination()` pretty-prints for a terminal). */
  destination?: NodeJS.WritableStream | TurnBatchedOutput;
  /** Bound once secrets are loaded (before that, nothing is masked: no secret is known yet). */
  masker?: LogMasker;
  /** Standard output's flush window for lines below `warn` (AGENTD_LOG_FLUSH_MS; see TurnBatchedOutput); default 0. */
  flushMs?: number;
}

/**
 * The server's logger (pino, one JSON line per record). Secret values are masked at the source:
 * each string a record carries (its message, error messages and stacks, the URL of a request,
 * any other field) is scanned for them as the record is formatted, except fields the server
 * fills itself (ids, numbers, route patterns). No whole line is scanned afterwards, so a request
 * line costs the same with ten thousand conversations holding secrets as with one.
 */
export function createLogger(options: LoggerOptions): Logger {
  const target = options.destination ?? standardOutput(options.flushMs ?? 0);
  const masker = options.masker ?? { mask: (text: string) => text };
  const mask = (text: string) => masker.mask(text);
  const logger = pino(
    {
      level: options.level,
      base: { service: 'agentd' },
      // Serializers run after the formatter below, which has already put every field in its final form.
      serializers: { err: passThrough, msg: (message: unknown) => (typeof message === 'string' ? mask(message) : message) },
      formatters: {
        bindings: (bindings) => maskFields(bindings, mask, 0),
        log: (record) => maskFields(record, mask, 0),
      },
      // pino formats a child's bindings without the formatter above: their text is masked once, when
      // the child is made. A child that adds none (Fastify makes one of the root at start-up) has the
      // root's, which the formatter masked: nothing to scan (nor a masker of every secret to build then).
      onChild: (child) => {
        const bindings = child as unknown as Record<symbol, string>;
        const text = bindings[CHINDINGS] ?? '';
        if (text !== rootBindings) bindings[CHINDINGS] = mask(text);
      },
    },
    target,
  );
  const rootBindings = (logger as unknown as Record<symbol, string>)[CHINDINGS];
  textMasks.set(logger, mask);
  return logger;
}

const textMasks = new WeakMap<Logger, (text: string) => string>();

/**
 * How a logger made by createLogger masks a string field (undefined for any other logger): for
 * code that formats a line itself in the same form (http/request-log-line.ts).
 */
export function textMaskOf(logger: Logger): ((text: string) => string) | undefined {
  return textMasks.get(logger);
}

const passThrough = (value: unknown) => value;

/** Pretty, coloured lines when stdout is a terminal (pino-pretty, loaded only then); undefined otherwise (JSON lines). */
export async function terminalDestination(): Promise<NodeJS.WritableStream | undefined> {
  if (!process.stdout.isTTY) return undefined;
  const { default: pretty } = await import('pino-pretty');
  return pretty({ sync: true, colorize: true, translateTime: 'SYS:HH:MM:ss.l' });
}

/** One for the process, whatever the number of loggers (tests make many). */
let stdoutOutput: TurnBatchedOutput | null = null;
function standardOutput(flushMs: number): TurnBatchedOutput {
  stdoutOutput ??= new TurnBatchedOutput(1);
  stdoutOutput.setFlushWindow(flushMs);
  return stdoutOutput;
}
const CHINDINGS = pino.symbols.chindingsSym;

/** A request as logged: what it asked for, never its headers or body. */
function loggedRequest(request: { method?: string; url?: string; id?: string; ip?: string }, mask: (text: string) => string) {
  return { id: request.id, method: request.method, url: mask(loggableUrl(request.url ?? '')), ip: request.ip };
}

function maskFields(record: Record<string, unknown>, mask: (text: string) => string, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  let keys = 0;
  for (const key in record) {
    const value = record[key];
    if (value === undefined || typeof value === 'function') continue;
    if (++keys > MAX_KEYS) {
      out['…'] = '[more fields left out]';
      break;
    }
    if (REDACTED_KEYS.has(key)) out[key] = '[redacted]';
    else if (SERVER_KEYS.has(key)) out[key] = value;
    else if (key === 'url' && typeof value === 'string') out[key] = mask(loggableUrl(value));
    else if (key === 'req' && value !== null && typeof value === 'object') out[key] = loggedRequest(value as Record<string, string>, mask);
    else if (key === 'res' && value !== null && typeof value === 'object' && 'statusCode' in value) out[key] = { status: (value as { statusCode: number }).statusCode };
    else out[key] = maskValue(value, mask, depth + 1);
  }
  return out;
}

function maskValue(value: unknown, mask: (text: string) => string, depth: number): unknown {
  if (typeof value === 'string') return mask(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth > MAX_DEPTH) return '[too deep]';
  if (value instanceof Error) return maskValue(pino.stdSerializers.err(value), mask, depth);
  if (Array.isArray(value)) return value.slice(0, MAX_KEYS).map((item) => maskValue(item, mask, depth + 1));
  if (value instanceof Map) return maskValue(Object.fromEntries(value), mask, depth);
  if (value instanceof Set) return maskValue([...value], mask, depth);
  if (Buffer.isBuffer(value)) return `[${value.length} bytes]`;
  if (typeof (value as { toJSON?: unknown }).toJSON === 'function') return maskValue((value as { toJSON: () => unknown }).toJSON(), mask, depth);
  return maskFields(value as Record<string, unknown>, mask, depth);
}
