import pino, { type Logger } from 'pino';
import { loggableUrl, textMaskOf } from '../logger.js';
import { TurnBatchedOutput, type EncodedLine } from './turn-batched-output.js';
import { copy, jsonNumber, jsonString, writeJsonString, writeMilliseconds, writeTime } from './json-bytes.js';

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
 * logger's destination whole. pino's generic path (the merge object copied by the masking
 * formatter, then walked key by key) was most of the cost of a small request's line. Any other
 * logger, or one whose destination wants each line's metadata, gets `logger.info`.
 *
 * The line is encoded straight to bytes: into standard output's buffer (TurnBatchedOutput) with
 * no string made for it, when that buffer is next written out (with the other request lines of
 * its flush window), or at once into a scratch buffer for any other stream.
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
  const stream = internals[STREAM] as { write(line: string): unknown };
  const output = stream instanceof TurnBatchedOutput ? stream : new StreamLines(stream);
  const pieces = new LinePieces(internals);
  return (request) => {
    if (!logger.isLevelEnabled('info')) return;
    // The time and the URL's masking are taken now (a secret deleted before the line is encoded
    // is still masked); the rest is encoded when the output needs the bytes.
    const time = pieces.ownTime ? Date.now() : 0;
    const timeText = pieces.ownTime ? '' : (internals[TIME] as () => string)();
    // The message is masked as pino's path masks it: a secret whose value is in this fixed text
    // (say `completed`) is masked there too, so no line holds a secret value, whatever it is.
    output.writeLater(new RequestLine({ pieces, request, url: mask(loggableUrl(request.url)), message: mask(REQUEST_COMPLETED), time, timeText }));
  };
}

/** Any other destination (a test's stream, say): each line encoded at once into a scratch buffer, then written as one string. */
class StreamLines {
  private scratch = Buffer.allocUnsafe(1024);
  constructor(private readonly stream: { write(line: string): unknown }) {}

  writeLater(line: EncodedLine): void {
    if (line.maxBytes > this.scratch.length) this.scratch = Buffer.allocUnsafe(line.maxBytes * 2);
    const end = line.encode(this.scratch, 0);
    this.stream.write(this.scratch.toString('utf8', 0, end));
  }
}

/**
 * What request lines share, encoded once and kept: the level and bindings, the method's piece,
 * the route's and status's, the client address's. Methods come from Node's parser, routes from
 * the route table, addresses from the socket: their pieces are escaped, when first seen, all the
 * same.
 */
class LinePieces {
  /** pino's own time (`,"time":` and `Date.now()`): its digits are written here. */
  readonly ownTime: boolean;
  readonly ending: Buffer;
  private readonly info: number;
  private readonly methods = new Pieces((method) => Buffer.from(`,"method":${jsonString(method)},"url":`));
  private readonly routes = new Pieces((route) => new StatusPieces(`,"route":${jsonString(route)},"status":`));
  private readonly addresses = new Pieces((ip) => Buffer.from(`,"ip":${jsonString(ip)}`));
  private levelText = '';
  private levelBytes: Buffer = EMPTY;
  private bindingsText = '';
  private bindingsBytes: Buffer = EMPTY;

  constructor(readonly internals: PinoInternals) {
    this.info = internals.levels.values.info!;
    this.ownTime = internals[TIME] === pino.stdTimeFunctions.epochTime;
    this.ending = Buffer.from(`,"msg":${JSON.stringify(REQUEST_COMPLETED)}${internals[END] as string}`);
  }

  level(): Buffer {
    const level = (this.internals[LEVEL_PREFIXES] as Record<number, string>)[this.info]!;
    if (level !== this.levelText) this.levelBytes = Buffer.from((this.levelText = level));
    return this.levelBytes;
  }

  /** The bindings, then `,"reqId":`. */
  bindings(): Buffer {
    const bindings = this.internals[BINDINGS] as string;
    if (bindings !== this.bindingsText) this.bindingsBytes = Buffer.from(`${(this.bindingsText = bindings)},"reqId":`);
    return this.bindingsBytes;
  }

  method(method: string): Buffer {
    return this.methods.of(method);
  }

  routeAndStatus(route: string, status: number): Buffer {
    return this.routes.of(route).of(status);
  }

  address(ip: string | undefined): Buffer {
    return ip === undefined ? EMPTY : this.addresses.of(ip);
  }
}

interface RequestLineFields {
  pieces: LinePieces;
  request: CompletedRequest;
  /** The URL and the message, masked when the line was taken. */
  url: string;
  message: string;
  time: number;
  /** pino's time text, when it is not its own epoch time. */
  timeText: string;
}

/**
 * One request's line, kept as its fields until it is encoded. Only the strings a client chooses
 * (the request id, the URL, the conversation id) are checked for characters JSON must escape, as
 * they are copied.
 */
class RequestLine implements EncodedLine {
  constructor(private readonly line: RequestLineFields) {}

  get maxBytes(): number {
    const { request, url, timeText, message, pieces } = this.line;
    // A JSON escape takes at most 6 bytes per UTF-16 unit (\u001f), and so does UTF-8; the
    // pieces are at most 6 times their text; keys, numbers and punctuation, under 512 bytes.
    const strings = request.reqId.length + url.length + (request.conversationId?.length ?? 0) + timeText.length + message.length + request.method.length + request.route.length + (request.ip?.length ?? 0);
    return 6 * strings + 512 + pieces.bindings().length;
  }

  encode(bytes: Buffer, at: number): number {
    const { pieces, request, url, message, time, timeText } = this.line;
    at = copy(pieces.level(), bytes, at);
    if (pieces.ownTime) at = writeTime(bytes, copy(TIME_KEY, bytes, at), time);
    else at += bytes.write(timeText, at, 'utf8');
    at = writeJsonString(bytes, copy(pieces.bindings(), bytes, at), request.reqId);
    if (request.conversationId !== undefined) at = writeJsonString(bytes, copy(CONVERSATION_KEY, bytes, at), request.conversationId);
    at = writeJsonString(bytes, copy(pieces.method(request.method), bytes, at), url);
    at = writeMilliseconds(bytes, copy(pieces.routeAndStatus(request.route, request.status), bytes, at), request.ms);
    at = copy(pieces.address(request.ip), bytes, at);
    if (message === REQUEST_COMPLETED) return copy(pieces.ending, bytes, at);
    at = writeJsonString(bytes, copy(MESSAGE_KEY_BYTES, bytes, at), message);
    return at + bytes.write(pieces.internals[END] as string, at, 'utf8');
  }
}

const EMPTY: Buffer = Buffer.alloc(0);
const TIME_KEY = Buffer.from(',"time":');
const CONVERSATION_KEY = Buffer.from(',"conversation_id":');
const MESSAGE_KEY_BYTES = Buffer.from(',"msg":');

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
  private readonly byStatus: Buffer[] = [];
  constructor(private readonly route: string) {}

  of(status: number): Buffer {
    // Statuses are three-digit integers (Node refuses any other); anything else is written as it comes.
    if (!(status >= 100 && status <= 999 && Number.isInteger(status))) return Buffer.from(`${this.route}${jsonNumber(status)},"ms":`);
    return (this.byStatus[status] ??= Buffer.from(`${this.route}${status},"ms":`));
  }
}
