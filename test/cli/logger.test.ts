import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { TurnBatchedOutput } from '../../src/perf/turn-batched-output.js';
import { SecretMasker } from '../../src/core/secrets/secret-masker.js';
import { CLI, tempDir } from '../support/agentd.js';

const SECRET = 'sk-live-0123456789abcdef';

function capture(masked: string[] = []) {
  const lines: string[] = [];
  const stream = new PassThrough();
  stream.on('data', (chunk: Buffer) => lines.push(...chunk.toString().split('\n').filter(Boolean)));
  const masker = new SecretMasker({ TOKEN: SECRET });
  const logger = createLogger({
    level: 'debug',
    destination: stream,
    masker: {
      mask: (text) => {
        masked.push(text);
        return masker.maskText(text);
      },
    },
  });
  return { logger, lines, text: () => lines.join('\n') };
}

describe('the logger masks secret values at the source', () => {
  it('in messages, errors (message, stack, cause), nested fields, arrays and child bindings', () => {
    const { logger, lines, text } = capture();
    const error = new Error(`git clone https://x:${SECRET}@example.com failed`, { cause: new Error(`token ${SECRET} refused`) });
    logger.error({ err: error, attempt: { url: `https://example.com/?k=${SECRET}`, args: ['--token', SECRET] } }, 'delivery failed');
    logger.warn(`retrying with ${SECRET}`);
    logger.child({ hook: `Bearer ${SECRET}` }).info('child line');
    logger.error(new Error(`plain ${SECRET}`));
    expect(lines).toHaveLength(4);
    for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
    expect(text()).not.toContain(SECRET);
    expect(text()).toContain('<secret:TOKEN>');
    const first = JSON.parse(lines[0]!);
    expect(first.err.message).toContain('<secret:TOKEN>@example.com');
    expect(first.err.stack).toContain('<secret:TOKEN>');
    expect(first.err.type).toBe('Error');
    expect(first.attempt.args).toEqual(['--token', '<secret:TOKEN>']);
    expect(JSON.parse(lines[3]!).msg).toBe('plain <secret:TOKEN>');
  });

  it('censors key fields whatever their value, and access tokens in URLs', () => {
    const { logger, text } = capture();
    logger.info({ llm: { model: 'm', api_key: 'sk-other' }, headers: { authorization: 'Bearer other' }, url: '/x/stream?after_seq=1&access_token=tok-123' }, 'configured');
    expect(text()).not.toContain('sk-other');
    expect(text()).not.toContain('Bearer other');
    expect(text()).not.toContain('tok-123');
    expect(text()).toContain('access_token=[redacted]');
  });

  it("scans only the strings that can carry a secret: a request line's URL and message, not its ids, method, route or numbers", () => {
    const masked: string[] = [];
    const { logger, lines } = capture(masked);
    logger.info({ reqId: 'a6a336ea-c5d4-4480-938c-7dcdc238cbff', conversation_id: 'c2', method: 'GET', url: `/conversations?page_id=${SECRET}`, route: '/conversations', status: 200, ms: 1.5, ip: '127.0.0.1' }, 'request completed');
    expect(masked.sort()).toEqual([`/conversations?page_id=${SECRET}`, 'request completed']);
    expect(JSON.parse(lines[0]!)).toMatchObject({ reqId: 'a6a336ea-c5d4-4480-938c-7dcdc238cbff', method: 'GET', url: '/conversations?page_id=<secret:TOKEN>', status: 200, ms: 1.5 });
  });
});

describe('child loggers', () => {
  it('mask the bindings they add, and scan nothing for a child that adds none (Fastify makes one at start-up: no masker of every secret is built then)', () => {
    const masked: string[] = [];
    const { logger, lines } = capture(masked);
    const plain = logger.child({});
    expect(masked).toEqual([]);
    plain.child({ hook: `Bearer ${SECRET}` }).info('child line');
    expect(masked.some((text) => text.includes(SECRET))).toBe(true);
    expect(lines[0]).toContain('Bearer <secret:TOKEN>');
    expect(lines[0]).not.toContain(SECRET);
  });
});

describe('TurnBatchedOutput', () => {
  it('writes the lines of one event-loop turn together when the turn ends, in order', async () => {
    const file = path.join(tempDir(), 'log.jsonl');
    const fd = fs.openSync(file, 'w');
    try {
      const output = new TurnBatchedOutput(fd);
      output.write('one\n');
      output.write('two\n');
      expect(fs.readFileSync(file, 'utf8')).toBe('');
      await new Promise((resolve) => setImmediate(resolve));
      expect(fs.readFileSync(file, 'utf8')).toBe('one\ntwo\n');
      output.write('three\n');
      output.flushSync();
      expect(fs.readFileSync(file, 'utf8')).toBe('one\ntwo\nthree\n');
    } finally {
      fs.closeSync(fd);
    }
  });

  it('takes a line in pieces, short and long, ASCII or not, and more than its first buffer holds in one turn', async () => {
    const file = path.join(tempDir(), 'log.jsonl');
    const fd = fs.openSync(file, 'w');
    try {
      const output = new TurnBatchedOutput(fd);
      const pieces = ['{"a":', '"café 😀"', ',"b":"', 'x'.repeat(100), 'é'.repeat(70), '"}\n'];
      for (const piece of pieces) output.append(piece);
      output.endLine();
      const long = `${'long line ✓ '.repeat(12_000)}\n`;
      output.write(long);
      output.write('last\n');
      expect(fs.readFileSync(file, 'utf8')).toBe('');
      await new Promise((resolve) => setImmediate(resolve));
      expect(fs.readFileSync(file, 'utf8')).toBe(`${pieces.join('')}${long}last\n`);
      output.write('after\n');
      output.flushSync();
      expect(fs.readFileSync(file, 'utf8')).toBe(`${pieces.join('')}${long}last\nafter\n`);
    } finally {
      fs.closeSync(fd);
    }
  });
});

describe('TurnBatchedOutput with a flush window (AGENTD_LOG_FLUSH_MS)', () => {
  const info = (n: number) => `{"level":30,"time":1,"n":${n},"msg":"request completed"}\n`;
  const warn = '{"level":40,"time":1,"msg":"disk almost full"}\n';
  const until = async (check: () => boolean) => {
    while (!check()) await new Promise((resolve) => setTimeout(resolve, 2));
  };
  const turnEnd = () => new Promise((resolve) => setImmediate(resolve));
  /** An output with the window given onto a temp file; `written()` reads what reached it. */
  async function withOutput(flushMs: number, use: (output: TurnBatchedOutput, written: () => string) => Promise<void>): Promise<void> {
    const file = path.join(tempDir(), 'log.jsonl');
    const fd = fs.openSync(file, 'w');
    try {
      await use(new TurnBatchedOutput(fd, flushMs), () => fs.readFileSync(file, 'utf8'));
    } finally {
      fs.closeSync(fd);
    }
  }

  it('holds lines below warn past their turn, and writes them within the window, in order', async () => {
    await withOutput(10, async (output, written) => {
      output.write(info(1));
      output.append('{"level":30,"n":2,"msg":"request completed"}\n');
      output.endLine();
      await turnEnd();
      expect(written()).toBe('');
      await until(() => written() !== '');
      expect(written()).toBe(`${info(1)}{"level":30,"n":2,"msg":"request completed"}\n`);
      // The window's timer is armed again by the next line.
      output.write(info(3));
      await until(() => written().endsWith(info(3)));
    });
  });

  it('writes a warn line at the end of its turn with everything pending before it; and everything once 32 KiB are pending', async () => {
    await withOutput(60_000, async (output, written) => {
      output.write(info(1));
      output.write(info(2));
      await turnEnd();
      expect(written()).toBe('');
      output.write(warn);
      output.write(info(3));
      await turnEnd();
      expect(written()).toBe(`${info(1)}${info(2)}${warn}${info(3)}`);
      // A line not of pino's form is written at its turn's end too.
      output.write('plain text\n');
      await turnEnd();
      expect(written().endsWith('plain text\n')).toBe(true);
      const before = written().length;
      const many = Array.from({ length: 700 }, (_, i) => info(i)).join('');
      for (let i = 0; i < 700; i++) output.write(info(i));
      await turnEnd();
      expect(written().slice(before)).toBe(many);
    });
  });

  it('without a window (0), writes each line at the end of its turn; a new window writes what waited on the old one', async () => {
    await withOutput(60_000, async (output, written) => {
      output.write(info(1));
      output.setFlushWindow(0);
      expect(written()).toBe(info(1));
      output.write(info(2));
      await turnEnd();
      expect(written()).toBe(`${info(1)}${info(2)}`);
    });
  });

  it('keeps a line written later as its fields until its bytes are needed, and keeps the order of lines', async () => {
    /** A kept line that counts its encodings. */
    const kept = (text: string) => {
      const line = {
        encoded: 0,
        maxBytes: text.length,
        encode(bytes: Buffer, at: number) {
          line.encoded++;
          return at + bytes.write(text, at, 'latin1');
        },
      };
      return line;
    };
    await withOutput(60_000, async (output, written) => {
      const first = kept(info(1));
      output.writeLater(first);
      await turnEnd();
      expect(first.encoded).toBe(0);
      // Another line comes: what was kept before it is encoded first.
      output.write(info(2));
      expect(first.encoded).toBe(1);
      const third = kept(info(3));
      output.writeLater(third);
      output.write(warn);
      await turnEnd();
      expect(written()).toBe(`${info(1)}${info(2)}${info(3)}${warn}`);
      // Kept lines are bounded: past 256, they are encoded; past 32 KiB pending, everything is written at the turn's end.
      const big = (n: number) => `{"level":30,"n":${n},"pad":"${'x'.repeat(200)}"}\n`;
      const lines = Array.from({ length: 300 }, (_, i) => kept(big(i)));
      for (const line of lines) output.writeLater(line);
      expect(lines.filter((line) => line.encoded === 1)).toHaveLength(256);
      await turnEnd();
      expect(lines.every((line) => line.encoded === 1)).toBe(true);
      expect(written()).toBe(`${info(1)}${info(2)}${info(3)}${warn}${lines.map((_, i) => big(i)).join('')}`);
    });
  });

  it("in a process: what waits is written when it exits, also on an uncaught error, and with a warn line before a kill -9; a kill -9 loses at most the window's lines", () => {
    if (!fs.existsSync(CLI)) throw new Error('dist/ is missing: run `npm run build`');
    const child = path.join(import.meta.dirname, '..', 'support', 'log-flush-child.mjs');
    const run = (end: string) => spawnSync(process.execPath, [child, '60000', end], { encoding: 'utf8', timeout: 30_000 });
    /** Each line's `n` (the request-like lines) or its message. */
    const messages = (stdout: string) =>
      stdout
        .split('\n')
        .filter(Boolean)
        .map((text) => {
          const line = JSON.parse(text) as { msg: string; n?: number; reqId?: string };
          return line.n ?? line.reqId ?? line.msg;
        });
    const exited = run('exit');
    expect({ status: exited.status, lines: messages(exited.stdout) }).toEqual({ status: 0, lines: [0, 1, 2, 'r3'] });
    const thrown = run('throw');
    expect({ status: thrown.status, lines: messages(thrown.stdout) }).toEqual({ status: 1, lines: [0, 1, 2, 'r3'] });
    expect(thrown.stderr).toMatch(/boom/);
    const warned = run('kill-after-warn');
    expect({ signal: warned.signal, lines: messages(warned.stdout) }).toEqual({ signal: 'SIGKILL', lines: [0, 1, 2, 'r3', 'disk almost full'] });
    const killed = run('kill');
    expect({ signal: killed.signal, stdout: killed.stdout }).toEqual({ signal: 'SIGKILL', stdout: '' });
  });
});
