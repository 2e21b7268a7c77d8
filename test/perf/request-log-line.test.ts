import fs from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { TurnBatchedOutput } from '../../src/perf/turn-batched-output.js';
import { tempDir } from '../support/agentd.js';
import { SecretMasker } from '../../src/core/secrets/secret-masker.js';
import { REQUEST_COMPLETED, requestLineWriter, type CompletedRequest } from '../../src/perf/request-log-line.js';

const SECRET = 'sk-live-0123456789abcdef';

/** A destination that keeps what each write() was given (one log line each). */
function destination() {
  const writes: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      writes.push(chunk.toString());
      callback();
    },
  });
  return { stream, writes };
}

function logger(level = 'info') {
  const out = destination();
  const masker = new SecretMasker({ TOKEN: SECRET });
  return { logger: createLogger({ level, destination: out.stream, masker: { mask: (text) => masker.maskText(text) } }), writes: out.writes };
}

/** The line as pino writes it for the same fields (what app.ts logged before request-log-line.ts). */
function throughPino(target: pino.Logger, request: CompletedRequest): void {
  const { reqId, conversationId, method, url, route, status, ms, ip } = request;
  target.info({ reqId, conversation_id: conversationId, method, url, route, status, ms, ip }, REQUEST_COMPLETED);
}

const base: CompletedRequest = { reqId: 'a6a336ea-c5d4-4480-938c-7dcdc238cbff', conversationId: undefined, method: 'GET', url: '/alive', route: '/alive', status: 200, ms: 0.12, ip: '127.0.0.1' };

const requests: CompletedRequest[] = [
  base,
  { ...base, conversationId: 'c2b1e6a0-93c1-4e39-9d7e-0f7f1c7a1b11', url: '/conversations/c2b1e6a0-93c1-4e39-9d7e-0f7f1c7a1b11', route: '/conversations/:id' },
  { ...base, url: `/conversations?page_id=${SECRET}&limit=2`, route: '/conversations', status: 400, ms: 1.5 },
  { ...base, url: '/conversations/x/stream?after_seq=1&access_token=tok-123', route: '/conversations/:id/stream', conversationId: 'x' },
  { ...base, url: '/files/a%22b?path="quoted"\\back', route: 'unmatched', status: 404, ms: 0 },
  { ...base, url: '/files/\u0001\u001f\ttab', route: 'unmatched', status: 404 },
  { ...base, url: '/files/café/😀', route: 'unmatched' },
  { ...base, url: `/x/${'long-segment-'.repeat(20)}` },
  { ...base, reqId: 'client "id" \\ with quotes', conversationId: 'sp"ace', method: 'DELETE', status: 500, ms: 12345.67 },
  { ...base, ip: undefined, ms: Number.NaN },
  { ...base, ms: Number.POSITIVE_INFINITY, status: 204 },
  // Durations as app.ts rounds them (hundredths), and others, written as pino writes numbers.
  ...[0, 0.01, 0.05, 0.1, 0.3, 0.5, 1, 3, 10.3, 99.99, 100.01, 1e4, 123456789.01, 0.1 + 0.2, 0.123456, 2e13 / 3, 1e21, -0].map((ms) => ({ ...base, ms })),
  // Statuses Node would refuse, methods, routes and addresses that need escaping: written (and escaped) all the same.
  { ...base, status: 1234 },
  { ...base, status: 99.5 },
  { ...base, method: 'GE"T', route: '/a"b\\c', ip: '::1\u0001' },
  // Client-chosen strings that are not ASCII, and an empty request id.
  { ...base, reqId: 'id-é-ü', conversationId: 'conv-ß-😀', url: '/conversations/conv-%F0%9F%98%80' },
  { ...base, reqId: '' },
  // The same kinds of characters in strings long enough to be checked and copied whole (json-bytes.ts).
  { ...base, reqId: 'a-request-id-chosen-by-a-client-that-is-long', url: '/files/a-long-path/with-\u0001-and-\u001f-and-\ttab-inside', route: 'unmatched' },
  { ...base, url: '/files/a-long-path-with-a-quote-"-and-a-backslash-\\-in-it', route: 'unmatched' },
  { ...base, conversationId: 'a-long-conversation-id-not-ascii-é-😀-end', url: '/files/a-long-path/café/😀/and-more-after-it' },
  { ...base, url: '/files/a-long-path-with-delete-\u007f-and-tilde-~-in-it', route: 'unmatched' },
];

describe('the request line', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date('2026-11-23T12:00:00.000Z'));
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("is, byte for byte, the line logger.info writes for the same fields, secrets and access tokens masked", () => {
    for (const request of requests) {
      const direct = logger();
      // Formatted by the writer itself, not handed to pino.
      const info = vi.spyOn(direct.logger, 'info');
      requestLineWriter(direct.logger)(request);
      expect(info).not.toHaveBeenCalled();
      const reference = logger();
      throughPino(reference.logger, request);
      expect(direct.writes).toHaveLength(1);
      expect(direct.writes[0]).toBe(reference.writes[0]);
      expect(direct.writes[0]).not.toContain(SECRET);
      expect(direct.writes[0]).not.toContain('tok-123');
      expect(() => JSON.parse(direct.writes[0]!)).not.toThrow();
    }
    // The same lines from one writer, whose pieces (methods, routes with statuses, addresses) are kept from line to line.
    const one = logger();
    const reference = logger();
    const write = requestLineWriter(one.logger);
    for (const request of [...requests, ...requests]) {
      write(request);
      throughPino(reference.logger, request);
    }
    expect(one.writes).toEqual(reference.writes);
    const masked = logger();
    requestLineWriter(masked.logger)(requests[2]!);
    expect(JSON.parse(masked.writes[0]!)).toMatchObject({ level: 30, service: 'agentd', url: '/conversations?page_id=<secret:TOKEN>&limit=2', status: 400, ms: 1.5, msg: REQUEST_COMPLETED });
  });

  it("writes pino's time, digit for digit, whatever the clock says", () => {
    const direct = logger();
    const reference = logger();
    const write = requestLineWriter(direct.logger);
    // Millions and the rest are written apart: zeros inside and at the end of either, and clocks before 1970 + 1,000 s.
    for (const time of [Date.UTC(2026, 10, 23), Date.UTC(2026, 10, 23) + 5, 1_764_000_123_456, 1_000_000_000_000, 1_999_999_999_999, 1_000_000, 999_999, 0, 12_345]) {
      vi.setSystemTime(time);
      write(base);
      throughPino(reference.logger, base);
    }
    expect(direct.writes).toEqual(reference.writes);
    expect(JSON.parse(direct.writes[2]!).time).toBe(1_764_000_123_456);
  });

  it('escapes a lone surrogate in a client\'s string, so that the line reads back as it came', () => {
    // As JSON.stringify writes it, and pino on Node 25 and later (before, pino writes strings
    // under 100 characters raw, and the lone surrogate becomes U+FFFD on the way out).
    const direct = logger();
    const request = { ...base, reqId: 'id-\ud800', conversationId: 'conv-\udfff-😀', url: '/x/\ud83d' };
    requestLineWriter(direct.logger)(request);
    expect(direct.writes[0]).toContain('"reqId":"id-\\ud800"');
    expect(JSON.parse(direct.writes[0]!)).toMatchObject({ reqId: request.reqId, conversation_id: request.conversationId, url: request.url });
    // Long ones too.
    const long = { ...base, reqId: 'a-long-request-id-\ud800-end', conversationId: 'a-long-conversation-id-\udfff-end', url: '/x/a-long-path-with-\ud83d-alone' };
    requestLineWriter(direct.logger)(long);
    expect(direct.writes[1]).toContain('\\ud800');
    expect(JSON.parse(direct.writes[1]!)).toMatchObject({ reqId: long.reqId, conversation_id: long.conversationId, url: long.url });
  });

  it('is the same bytes when written in pieces straight into the standard output\'s buffer (TurnBatchedOutput)', () => {
    const dir = tempDir();
    try {
      const file = path.join(dir, 'lines.jsonl');
      const fd = fs.openSync(file, 'w');
      const output = new TurnBatchedOutput(fd);
      const masker = new SecretMasker({ TOKEN: SECRET });
      const direct = createLogger({ level: 'info', destination: output, masker: { mask: (text) => masker.maskText(text) } });
      const info = vi.spyOn(direct, 'info');
      const reference = logger();
      for (const request of requests) {
        requestLineWriter(direct)(request);
        // Lines pino writes itself go to the same buffer, in order.
        direct.warn({ url: request.url }, 'between');
        throughPino(reference.logger, request);
        reference.logger.warn({ url: request.url }, 'between');
      }
      expect(info).not.toHaveBeenCalled();
      output.flushSync();
      fs.closeSync(fd);
      const written = fs.readFileSync(file);
      expect(written.equals(Buffer.from(reference.writes.join(''), 'utf8'))).toBe(true);
      expect(written.toString('utf8')).not.toContain(SECRET);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('stays the same as pino\'s when more addresses come than it keeps pieces for', () => {
    const direct = logger();
    const reference = logger();
    // One writer for all: the pieces it keeps are reused, and the oldest addresses' dropped.
    const write = requestLineWriter(direct.logger);
    for (let round = 0; round < 2; round++) {
      for (let client = 0; client < 300; client++) {
        const request = { ...base, ip: `10.0.${client >> 8}.${client & 255}`, route: `/route/${client % 7}`, status: 200 + (client % 3) };
        write(request);
        throughPino(reference.logger, request);
      }
    }
    expect(direct.writes).toHaveLength(600);
    expect(direct.writes).toEqual(reference.writes);
  });

  it('masks a secret whose value is in the message itself, as pino does', () => {
    const out = destination();
    const masker = new SecretMasker({ WORD: 'completed' });
    const direct = createLogger({ level: 'info', destination: out.stream, masker: { mask: (text) => masker.maskText(text) } });
    requestLineWriter(direct)(base);
    const reference = destination();
    throughPino(createLogger({ level: 'info', destination: reference.stream, masker: { mask: (text) => masker.maskText(text) } }), base);
    expect(out.writes).toEqual(reference.writes);
    expect(out.writes[0]).not.toContain('completed');
    expect(JSON.parse(out.writes[0]!)).toMatchObject({ msg: 'request <secret:WORD>' });
  });

  it('writes nothing when info is not enabled', () => {
    const quiet = logger('warn');
    requestLineWriter(quiet.logger)(base);
    expect(quiet.writes).toEqual([]);
  });

  it('goes through logger.info for a logger not made by createLogger', () => {
    const out = destination();
    const plain = pino({ base: { service: 'other' } }, out.stream);
    const info = vi.spyOn(plain, 'info');
    requestLineWriter(plain)(requests[1]!);
    expect(info).toHaveBeenCalledOnce();
    const reference = destination();
    throughPino(pino({ base: { service: 'other' } }, reference.stream), requests[1]!);
    expect(out.writes).toEqual(reference.writes);
    expect(JSON.parse(out.writes[0]!)).toMatchObject({ service: 'other', conversation_id: requests[1]!.conversationId, msg: REQUEST_COMPLETED });
  });

  it('goes through logger.info for a destination that wants each line\'s level (pino.multistream)', () => {
    const errors = destination();
    const all = destination();
    const masker = new SecretMasker({ TOKEN: SECRET });
    const streams = pino.multistream([{ level: 'error', stream: errors.stream }, { level: 'info', stream: all.stream }]) as unknown as NodeJS.WritableStream;
    const multi = createLogger({ level: 'info', destination: streams, masker: { mask: (text) => masker.maskText(text) } });
    requestLineWriter(multi)(requests[2]!);
    expect(errors.writes).toEqual([]);
    expect(all.writes).toHaveLength(1);
    expect(all.writes[0]).not.toContain(SECRET);
  });
});
