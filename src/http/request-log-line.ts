import pino, { type Logger } from 'pino';
import { loggableUrl, textMaskOf } from '../logger.js';
import { TurnBatchedOutput } from '../turn-batched-output.js';

/** What the one line a request logs when it ends says about it. */
export interface CompletedRequest {
  reqId: string;
  /** Requests about a conversation (`/conversations/{id}/...`). */
  conversationId: string | undefined;
  method: string;
  url: string;
  /** The route's pattern (`/conversations/:id`), or `unmatched`. */
  route: string;
  status: number;
  ms: number;
  ip: string | undefined;
}

export const REQUEST_COMPLETED = 'request completed';

/** pino's own fields of a logger (pino.symbols; some are missing from its types). */
function pinoSymbol(name: string): symbol {
  const found = (pino.symbols as unknown as Record<string, symbol | undefined>)[name];
  if (found === undefined) throw new Error(`pino.symbols.${name} is missing`);
  return found;
}
const LEVEL_PREFIXES = pinoSymbol('lsCacheSym');
const TIME = pinoSymbol('timeSym');
const BINDINGS = pinoSymbol('chindingsSym');
const STREAM = pinoSymbol('streamSym');
const END = pinoSymbol('endSym');
const NEEDS_METADATA = pinoSymbol('needsMetadataGsym');
const MIXIN = pinoSymbol('mixinSym');
const HOOKS = pinoSymbol('hooksSym');
const MESSAGE_PREFIX = pinoSymbol('msgPrefixSym');
const MESSAGE_KEY = pinoSymbol('messageKeySym');

type PinoInternals = Record<symbol, unknown> & Logger;

/**
 * Writes the request line: with a logger made by createLogger, formatted here into exactly the
 * line `logger.info({ reqId, conversation_id, method, url, route, status, ms, ip }, 'request
 * completed')` writes (same level, time, bindings, order, masking of the URL), and handed to the
 * logger's destination as one string. pino's generic path (the merge object copied by the masking
 * formatter, then walked key by key) was most of the cost of a small request's line. Any other
 * logger, or one whose destination wants each line's metadata, gets `logger.info`.
 *
 * What repeats from request to request is written once and kept: the method's piece, the route's
 * and status's, the client address's. Only the strings a client chooses (the request id, the URL,
 * the conversation id) are checked for characters JSON must escape; methods come from Node's
 * parser, routes from the route table, addresses from the socket, and their pieces are escaped
 * once, when first seen, all the same.
 */
export function requestLineWriter(logger: Logger): (request: CompletedRequest) => void {
  const internals = logger as PinoInternals;
  const mask = textMaskOf(logger);
  const formatsItself =
    mask !== undefined &&
    (internals[STREAM] as Record<symbol, unknown>)[NEEDS_METADATA] !== true &&
    !internals[MIXIN] &&
    !(internals[HOOKS] as { streamWrite?: unknown }).streamWrite &&
    internals[MESSAGE_PREFIX] === undefined &&
    internals[MESSAGE_KEY] === 'msg';
  if (!formatsItself) {
    return (request) => {
      if (!logger.isLevelEnabled('info')) return;
      const { reqId, conversationId, method, url, route, status, ms, ip } = request;
      logger.info({ reqId, conversation_id: conversationId, method, url, route, status, ms, ip }, REQUEST_COMPLETED);
    };
  }
  const info = logger.levels.values.info!;
  const stream = internals[STREAM] as { write(line: string): unknown };
  const write =
    stream instanceof TurnBatchedOutput
      ? (line: string) => {
          stream.append(line);
          stream.endLine();
        }
      : (line: string) => void stream.write(line);
  const end = internals[END] as string;
  const ending = `,"msg":${JSON.stringify(REQUEST_COMPLETED)}${end}`;
  const methods = new Pieces((method: string) => `,"method":${jsonString(method)},"url":`);
  const routes = new Pieces((route: string) => new StatusPieces(`,"route":${jsonString(route)},"status":`));
  const addresses = new Pieces((ip: string) => `,"ip":${jsonString(ip)}`);
  return (request) => {
    if (!logger.isLevelEnabled('info')) return;
    // What calls out (the masker, pino's clock) first: nothing can throw half-way through the line.
    const start = (internals[LEVEL_PREFIXES] as Record<number, string>)[info]! + (internals[TIME] as () => string)();
    const url = mask(loggableUrl(request.url));
    // The message is masked as pino's path masks it: a secret whose value is in this fixed text
    // (say `completed`) is masked there too, so no line holds a secret value, whatever it is.
    const message = mask(REQUEST_COMPLETED);
    let line = start + (internals[BINDINGS] as string) + ',"reqId":' + jsonString(request.reqId);
    if (request.conversationId !== undefined) line += ',"conversation_id":' + jsonString(request.conversationId);
    line += methods.of(request.method) + jsonString(url) + routes.of(request.route).of(request.status) + jsonMilliseconds(request.ms);
    if (request.ip !== undefined) line += addresses.of(request.ip);
    write(message === REQUEST_COMPLETED ? line + ending : `${line},"msg":${jsonString(message)}${end}`);
  };
}

/** The pieces for a few values that recur (methods, routes, addresses), made when a value is first seen; a bounded number kept. */
class Pieces<T> {
  private readonly made = new Map<string, T>();
  constructor(private readonly make: (value: string) => T) {}

  of(value: string): T {
    let piece = this.made.get(value);
    if (piece === undefined) {
      piece = this.make(value);
      // Addresses are the clients', so not a fixed set: past the bound, the oldest go.
      if (this.made.size >= MAX_PIECES) this.made.delete(this.made.keys().next().value!);
      this.made.set(value, piece);
    }
    return piece;
  }
}

const MAX_PIECES = 256;

/** A route's piece followed by each status it answered with, then `,"ms":`. */
class StatusPieces {
  private readonly byStatus: string[] = [];
  constructor(private readonly route: string) {}

  of(status: number): string {
    // Statuses are three-digit integers (Node refuses any other); anything else is written as it comes.
    if (!(status >= 100 && status <= 999 && Number.isInteger(status))) return `${this.route}${jsonNumber(status)},"ms":`;
    return (this.byStatus[status] ??= `${this.route}${status},"ms":`);
  }
}

/** Characters JSON.stringify escapes: control characters, the quote, the backslash, and surrogates (a lone one is escaped). */
const NEEDS_ESCAPE = /[\u0000-\u001f"\\\ud800-\udfff]/;

/** As pino writes a string: quoted as is when nothing in it needs escaping, else JSON.stringify. */
function jsonString(text: string): string {
  return NEEDS_ESCAPE.test(text) ? JSON.stringify(text) : `"${text}"`;
}

/**
 * As pino writes a number, for the usual duration rounded to hundredths (app.ts): written from
 * its integer count of hundredths, without V8's shortest-double conversion. Below 10^13 ms, the
 * shortest decimal that reads back as `hundredths / 100` is that quotient's own two decimals.
 */
function jsonMilliseconds(ms: number): string {
  const hundredths = Math.round(ms * 100);
  if (!(hundredths >= 0 && hundredths < 1e15 && hundredths / 100 === ms)) return jsonNumber(ms);
  const whole = Math.floor(hundredths / 100);
  const fraction = hundredths - whole * 100;
  if (fraction === 0) return `${whole}`;
  if (fraction % 10 === 0) return `${whole}.${fraction / 10}`;
  return fraction < 10 ? `${whole}.0${fraction}` : `${whole}.${fraction}`;
}

/** As pino writes a number: null when it is not finite. */
function jsonNumber(value: number): string {
  return Number.isFinite(value) ? String(value) : 'null';
}
