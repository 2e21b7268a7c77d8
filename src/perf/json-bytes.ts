/**
 * JSON written straight into a byte buffer, as pino writes it: strings, the time, durations.
 * Each writer takes the buffer and the offset to write at (the caller has made room) and returns
 * where its bytes end.
 */

/** Copies a piece's bytes (a few dozen each). */
export function copy(piece: Buffer, bytes: Buffer, at: number): number {
  const length = piece.length;
  for (let i = 0; i < length; i++) bytes[at + i] = piece[i]!;
  return at + length;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * A string as pino writes it: quoted as is when nothing in it needs escaping, else as
 * JSON.stringify writes it. Characters JSON.stringify escapes: control characters, the quote,
 * the backslash, and lone surrogates; anything not ASCII takes the slow path too (UTF-8). A short
 * string (a request id) is checked and copied character by character; a longer one (a URL, a
 * conversation id) is checked by a regular expression and copied by Buffer's encoder, which
 * costs a call but far less per character.
 */
export function writeJsonString(bytes: Buffer, at: number, text: string): number {
  const start = at;
  bytes[at++] = QUOTE;
  const length = text.length;
  if (length > SHORT_STRING) {
    if (!PLAIN.test(text)) return writeEscaped(bytes, start, text);
    at += bytes.write(text, at, 'latin1');
  } else {
    for (let i = 0; i < length; i++) {
      const code = text.charCodeAt(i);
      if (code < 0x20 || code === QUOTE || code === BACKSLASH || code >= 0x80) return writeEscaped(bytes, start, text);
      bytes[at++] = code;
    }
  }
  bytes[at++] = QUOTE;
  return at;
}

/** The slow path: as JSON.stringify writes the string, in UTF-8. */
function writeEscaped(bytes: Buffer, at: number, text: string): number {
  return at + bytes.write(JSON.stringify(text), at, 'utf8');
}

/** Strings up to this length are copied character by character. */
const SHORT_STRING = 24;
/** Printable ASCII but the quote and the backslash: written as is. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** Characters JSON.stringify escapes: control characters, the quote, the backslash, and surrogates (a lone one is escaped). */
const NEEDS_ESCAPE = /[\u0000-\u001f"\\\ud800-\udfff]/;

/** As pino writes a string (for the pieces, made once). */
export function jsonString(text: string): string {
  return NEEDS_ESCAPE.test(text) ? JSON.stringify(text) : `"${text}"`;
}

/** `Date.now()`'s digits, as pino writes them: millions and the rest apart, so that both stay small integers. */
export function writeTime(bytes: Buffer, at: number, time: number): number {
  if (!(time >= 1e6 && time < 1e13)) return at + bytes.write(String(time), at, 'latin1');
  const millions = Math.floor(time / 1e6);
  at = writeInteger(bytes, at, millions);
  return writePadded(bytes, at, time - millions * 1e6, 6);
}

/** A non-negative integer below 2^31. */
function writeInteger(bytes: Buffer, at: number, value: number): number {
  let digits = 1;
  for (let bound = 10; bound <= value; bound *= 10) digits++;
  return writePadded(bytes, at, value, digits);
}

/** A non-negative integer below 2^31 as exactly `digits` digits, zeros first. */
function writePadded(bytes: Buffer, at: number, value: number, digits: number): number {
  for (let i = digits - 1; i >= 0; i--) {
    const rest = (value / 10) | 0;
    bytes[at + i] = 0x30 + value - rest * 10;
    value = rest;
  }
  return at + digits;
}

/**
 * As pino writes a number, for the usual duration rounded to hundredths (app.ts): written from
 * its integer count of hundredths, without V8's shortest-double conversion. Below 2^31
 * hundredths, the shortest decimal that reads back as `hundredths / 100` is that quotient's own
 * two decimals (trailing zeros dropped).
 */
export function writeMilliseconds(bytes: Buffer, at: number, ms: number): number {
  const hundredths = Math.round(ms * 100);
  if (!(hundredths >= 0 && hundredths < 2 ** 31 && hundredths / 100 === ms)) return at + bytes.write(jsonNumber(ms), at, 'latin1');
  const whole = Math.floor(hundredths / 100);
  const fraction = hundredths - whole * 100;
  at = writeInteger(bytes, at, whole);
  if (fraction === 0) return at;
  bytes[at++] = 0x2e;
  if (fraction % 10 === 0) {
    bytes[at++] = 0x30 + fraction / 10;
    return at;
  }
  return writePadded(bytes, at, fraction, 2);
}

/** As pino writes a number: null when it is not finite. */
export function jsonNumber(value: number): string {
  return Number.isFinite(value) ? String(value) : 'null';
}
