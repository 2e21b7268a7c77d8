import type { FastifyInstance } from 'fastify';
import { InvalidRequestError } from '../../core/errors.js';

const MAX_DEPTH = 64;

/**
 * JSON bodies: an empty body is no body (undefined); others are parsed with JSON.parse after a linear scan that refuses nesting deeper than
 * MAX_DEPTH (deeply nested input would otherwise exhaust the stack later, in validation or
 * serialization, and surface as a 500).
 */
export function registerJsonBodyParser(app: FastifyInstance): void {
  // JSON everywhere: Fastify's built-in text/plain parser would let a plain-text body through to validation (400) instead of 415.
  app.removeContentTypeParser(['application/json', 'text/plain']);
  const parser = (_request: unknown, body: string | Buffer, done: (error: Error | null, value?: unknown) => void) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    // An empty body is no body: fine where the body is optional (see optionalBody) or absent
    // (POST /run, /pause...), a validation error naming the missing body where one is required.
    if (text.trim() === '') return done(null, undefined);
    if (nestedTooDeep(text)) {
      return done(new InvalidRequestError('invalid_json', `JSON nested deeper than ${MAX_DEPTH} levels is not accepted.`, { max_depth: MAX_DEPTH }), undefined);
    }
    let value: unknown;
    try {
      value = mayHoldProtoKey(text) ? JSON.parse(text, refuseProtoKey) : JSON.parse(text);
    } catch (error) {
      if (error instanceof ProtoKeyError) return done(new InvalidRequestError('invalid_json', 'JSON bodies may not hold a "__proto__" key: no object keeps it (it would be silently dropped).'), undefined);
      return done(new InvalidRequestError('invalid_json', `The request body is not valid JSON: ${(error as Error).message}`), undefined);
    }
    done(null, value);
  };
  app.addContentTypeParser('application/json', { parseAs: 'string' }, parser);
  app.addContentTypeParser(/^application\/[\w.-]+\+json$/, { parseAs: 'string' }, parser);
}

class ProtoKeyError extends Error {}

/** A key `__proto__` (as written, or spelled with \u escapes) can only be in a text that has one of these. */
function mayHoldProtoKey(text: string): boolean {
  return text.includes('__proto__') || text.includes('\\u');
}

function refuseProtoKey(key: string, value: unknown): unknown {
  if (key === '__proto__') throw new ProtoKeyError();
  return value;
}

/**
 * Whether objects and arrays in `text` nest deeper than MAX_DEPTH (brackets in strings skipped).
 * A text with no more than MAX_DEPTH opening brackets in all cannot: those are counted first, with
 * indexOf (a large body of text, a file's content, has few), and the walk a character at a time,
 * slow on a large body, is only for the texts that have more.
 */
function nestedTooDeep(text: string): boolean {
  return openingBrackets(text, MAX_DEPTH + 1) > MAX_DEPTH && nestingDepth(text) > MAX_DEPTH;
}

/** The deepest nesting of objects and arrays in `text` (strings skipped), stopping once past MAX_DEPTH. */
function nestingDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth > max) {
        max = depth;
        if (max > MAX_DEPTH) return max;
      }
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return max;
}

/** How many `{` and `[` the text holds, counting stopped at `enough`. */
function openingBrackets(text: string, enough: number): number {
  let count = 0;
  for (const bracket of ['{', '[']) {
    for (let at = text.indexOf(bracket); at >= 0 && count < enough; at = text.indexOf(bracket, at + 1)) count++;
  }
  return count;
}
