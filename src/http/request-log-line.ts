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
 * Writes the request line: with a logger made by createLogger, formatted here, field by field,
 * into exactly the line `logger.info({ reqId, conversation_id, method, url, route, status, ms, ip },
 * 'request completed')` writes (same level, time, bindings, order, masking of the URL), and handed
 * to the logger's destination. pino's generic path (the merge object copied by the masking
 * formatter, then walked key by key) was most of the cost of a small request's line. Any other
 * logger, or one whose destination wants each line's metadata, gets `logger.info`.
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
  const end = internals[END] as string;
  const ending = `,"msg":${JSON.stringify(REQUEST_COMPLETED)}${end}`;
  const line = linePieces(stream);
  return (request) => {
    if (!logger.isLevelEnabled('info')) return;
    // What calls out (the masker, pino's clock) first: once pieces are handed over, nothing can throw half-way through the line.
    const start = (internals[LEVEL_PREFIXES] as Record<number, string>)[info]! + (internals[TIME] as () => string)();
    const url = mask(loggableUrl(request.url));
    // The message is masked as pino's path masks it: a secret whose value is in this fixed text
    // (say `completed`) is masked there too, so no line holds a secret value, whatever it is.
    const message = mask(REQUEST_COMPLETED);
    line.add(start);
    line.add(internals[BINDINGS] as string);
    line.add(',"reqId":');
    addJsonString(line, request.reqId);
    if (request.conversationId !== undefined) {
      line.add(',"conversation_id":');
      addJsonString(line, request.conversationId);
    }
    line.add(',"method":');
    addJsonString(line, request.method);
    line.add(',"url":');
    addJsonString(line, url);
    line.add(',"route":');
    addJsonString(line, request.route);
    line.add(',"status":');
    line.add(jsonNumber(request.status));
    line.add(',"ms":');
    line.add(jsonNumber(request.ms));
    if (request.ip !== undefined) {
      line.add(',"ip":');
      addJsonString(line, request.ip);
    }
    if (message === REQUEST_COMPLETED) line.add(ending);
    else {
      line.add(',"msg":');
      addJsonString(line, message);
      line.add(end);
    }
    line.end();
  };
}

/** Where the pieces of a line go: straight into the turn's bytes (TurnBatchedOutput), or put together and written as one string. */
interface LinePieces {
  add(piece: string): void;
  end(): void;
}

function linePieces(stream: { write(line: string): unknown }): LinePieces {
  if (stream instanceof TurnBatchedOutput) return { add: (piece) => stream.append(piece), end: () => stream.endLine() };
  let line = '';
  return {
    add: (piece) => {
      line += piece;
    },
    end: () => {
      const whole = line;
      line = '';
      stream.write(whole);
    },
  };
}

/** As pino writes a string: quoted as is when nothing in it needs escaping, else JSON.stringify. */
function addJsonString(line: LinePieces, text: string): void {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    // Control characters, the quote, the backslash, and surrogates (a lone one is escaped).
    if (code < 32 || code === 34 || code === 92 || (code >= 0xd800 && code <= 0xdfff)) {
      line.add(JSON.stringify(text));
      return;
    }
  }
  line.add('"');
  line.add(text);
  line.add('"');
}

/** As pino writes a number: null when it is not finite. */
function jsonNumber(value: number): string {
  return Number.isFinite(value) ? String(value) : 'null';
}
