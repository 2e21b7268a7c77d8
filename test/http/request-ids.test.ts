import { afterEach, describe, expect, it } from 'vitest';
import { requestIdGenerator } from '../../src/http/request-ids.js';
import { startServer, type TestServer } from '../support/agentd.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('request ids', () => {
  it('are UUIDs in the version 4 layout, all different, with a random part of their own per process', () => {
    const next = requestIdGenerator();
    const ids = Array.from({ length: 20_000 }, next);
    for (const id of ids.slice(0, 100)) expect(id).toMatch(UUID_V4);
    expect(ids.at(-1)).toMatch(UUID_V4);
    expect(new Set(ids).size).toBe(ids.length);
    // Another process (another generator) draws another random part.
    const other = requestIdGenerator();
    expect(other().slice(0, 24)).not.toBe(ids[0]!.slice(0, 24));
  });

  it('count on across the halves of the counter, and wrap around at 2^48', () => {
    const suffixes = (start: number, count: number) => {
      const next = requestIdGenerator(start);
      return Array.from({ length: count }, () => next()).map((id) => {
        expect(id).toMatch(UUID_V4);
        return id.slice(24);
      });
    };
    expect(suffixes(0, 2)).toEqual(['000000000001', '000000000002']);
    expect(suffixes(2 ** 24 - 2, 3)).toEqual(['000000ffffff', '000001000000', '000001000001']);
    expect(suffixes(0xabcdef123456, 1)).toEqual(['abcdef123457']);
    expect(suffixes(2 ** 48 - 2, 3)).toEqual(['ffffffffffff', '000000000000', '000000000001']);
  });

  describe('on every answer', () => {
    let server: TestServer | undefined;
    afterEach(async () => {
      await server?.close();
      server = undefined;
    });

    it('x-request-id: generated, or the one the client sent; also on 401s, 404s, 400s and SSE streams', async () => {
      server = await startServer();
      const { url, auth } = server;
      const created = await fetch(`${url}/conversations`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{}' });
      const { id } = (await created.json()) as { id: string };
      const answers = [
        created,
        await fetch(`${url}/alive`),
        await fetch(`${url}/conversations/${id}`, { headers: auth }),
        await fetch(`${url}/conversations`),
        await fetch(`${url}/no-such-route`, { headers: auth }),
        await fetch(`${url}/conversations/not-a-uuid`, { headers: auth }),
      ];
      expect(answers.map((answer) => answer.status)).toEqual([201, 200, 200, 401, 404, 400]);
      const ids = answers.map((answer) => answer.headers.get('x-request-id'));
      for (const requestId of ids) expect(requestId).toMatch(UUID_V4);
      expect(new Set(ids).size).toBe(ids.length);

      const own = await fetch(`${url}/alive`, { headers: { 'x-request-id': 'client-chosen-id' } });
      expect(own.headers.get('x-request-id')).toBe('client-chosen-id');

      const aborted = new AbortController();
      const stream = await fetch(`${url}/conversations/${id}/events/stream`, { headers: auth, signal: aborted.signal });
      expect(stream.headers.get('content-type')).toContain('text/event-stream');
      expect(stream.headers.get('x-request-id')).toMatch(UUID_V4);
      aborted.abort();
    });
  });
});
