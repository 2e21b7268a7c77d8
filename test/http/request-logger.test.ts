import { Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { RequestLogger } from '../../src/http/request-logger.js';
import { startServer } from '../support/agentd.js';

function capture(level: string) {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { root: pino({ level }, stream), lines };
}

describe('a request\'s logger', () => {
  it('writes each level through a child with the request id and the conversation id of the URL', async () => {
    const { root, lines } = capture('trace');
    const log = new RequestLogger(root, { reqId: 'r-1' }, '/conversations/c%201/events?x=1');
    log.error({ code: 'e' }, 'failed');
    log.warn('warned');
    log.info('informed');
    log.debug('debugged');
    log.trace('traced');
    log.fatal('fatal');
    log.child({ extra: 1 }).info('from a child');
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines.map((line) => [line.level, line.msg])).toEqual([[50, 'failed'], [40, 'warned'], [30, 'informed'], [20, 'debugged'], [10, 'traced'], [60, 'fatal'], [30, 'from a child']]);
    for (const line of lines) expect(line).toMatchObject({ reqId: 'r-1', conversation_id: 'c 1' });
    expect(lines[0]).toMatchObject({ code: 'e' });
    expect(lines[6]).toMatchObject({ extra: 1 });
  });

  it('makes no pino child while nothing is logged at an enabled level', () => {
    const { root } = capture('warn');
    let children = 0;
    const child = root.child.bind(root);
    root.child = ((...args: Parameters<typeof child>) => {
      children += 1;
      return child(...args);
    }) as typeof root.child;
    const log = new RequestLogger(root, { reqId: 'r-2' }, '/alive');
    log.info('not written');
    log.debug('not written');
    log.silent();
    expect(children).toBe(0);
    log.warn('written');
    expect(children).toBe(1);
    expect(log.level).toBe('warn');
  });

  it("is each request's own: its lines carry the request id it answers with and the conversation's id", async () => {
    const lines: Record<string, unknown>[] = [];
    const logStream = new Writable({
      write(chunk, _encoding, done) {
        for (const line of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    });
    const server = await startServer({ logStream });
    try {
      // Rejected by the route's schema: the error handler logs it through the request's logger (at debug).
      const answer = await server.app.inject({ method: 'GET', url: '/conversations/not-a-uuid/events', headers: server.auth });
      expect(answer.statusCode).toBe(400);
      const rejected = lines.find((line) => line.msg === 'request rejected');
      expect(rejected).toMatchObject({ reqId: answer.headers['x-request-id'], conversation_id: 'not-a-uuid', code: 'validation_error' });
      // And the request line, written by app.ts through the root logger, carries it too.
      expect(lines.find((line) => line.msg === 'request completed' && line.url === '/conversations/not-a-uuid/events')).toMatchObject({ conversation_id: 'not-a-uuid' });
    } finally {
      await server.close();
    }
  });
});
