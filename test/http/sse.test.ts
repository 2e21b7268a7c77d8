import fs from 'node:fs';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, TEST_KEY, type TestServer } from '../support/agentd.js';
import { connectSse, type SseConnection, type SseMessage } from '../support/sse-client.js';
import { requestJson } from '../support/json-api.js';

let server: TestServer;
const open: SseConnection[] = [];

async function stream(path: string, headers: Record<string, string> = server.auth, target = server): Promise<SseConnection> {
  const connection = await connectSse(`${target.url}${path}`, headers);
  open.push(connection);
  return connection;
}

async function createConversation(target = server): Promise<string> {
  return (await target.services.conversations.create({ max_iterations_per_run: 500, confirmation_mode: false })).conversation.id;
}

function append(id: string, content: string, target = server) {
  return target.services.conversations.append(id, { kind: 'message', source: 'user', role: 'user', content });
}

async function postMessage(id: string, content: string): Promise<void> {
  expect((await requestJson(server, 'POST', `/conversations/${id}/messages`, { content, run: false })).status).toBe(202);
}

const ids = (messages: SseMessage[]) => messages.filter((m) => m.id !== undefined).map((m) => Number(m.id));
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const lastId = (messages: SseMessage[]) => (ids(messages).length ? Math.max(...ids(messages)) : 0);

beforeAll(async () => {
  server = await startServer({ env: { AGENTD_SSE_HEARTBEAT_S: '0.1' } });
});
afterAll(async () => {
  for (const connection of open) connection.close();
  await server?.close();
  if (server) fs.rmSync(server.dataDir, { recursive: true, force: true });
});

describe('conversation stream', () => {
  it('sends history, then live events, with id = seq and data = the stored event', async () => {
    const id = await createConversation();
    for (let i = 1; i <= 5; i++) append(id, `before ${i}`);
    const sse = await stream(`/conversations/${id}/events/stream`);
    expect(sse.status).toBe(200);
    expect(sse.headers.get('content-type')).toContain('text/event-stream');
    await sse.waitFor((m) => lastId(m) === 5);
    for (let i = 6; i <= 8; i++) append(id, `live ${i}`);
    await sse.waitFor((m) => lastId(m) === 8);
    const listed = (await (await fetch(`${server.url}/conversations/${id}/events`, { headers: server.auth })).json()) as { items: unknown[] };
    const persisted = sse.messages.filter((m) => m.id !== undefined);
    expect(ids(persisted)).toEqual(range(1, 8));
    expect(persisted.map((m) => m.event)).toEqual(Array(8).fill('message'));
    expect(persisted.map((m) => m.data)).toEqual(listed.items.map((event) => JSON.stringify(event)));
  });

  it('resumes with Last-Event-ID in the middle of a burst: gapless and duplicate-free', async () => {
    const id = await createConversation();
    const total = 500;
    const first = await stream(`/conversations/${id}/events/stream`);
    let sent = 0;
    const burst = (async () => {
      const workers = Array.from({ length: 8 }, async () => {
        while (sent < total) {
          sent += 1;
          await postMessage(id, `burst ${sent}`);
        }
      });
      await Promise.all(workers);
    })();
    await first.waitFor((m) => ids(m).length >= 150, 20_000);
    first.close();
    await first.ended;
    const resumeAt = lastId(first.messages);
    expect(sent, 'the reconnect happens while the burst is still in flight').toBeLessThan(total);
    const second = await stream(`/conversations/${id}/events/stream`, { ...server.auth, 'last-event-id': String(resumeAt) });
    await burst;
    await second.waitFor((m) => lastId(m) === total, 20_000);
    const union = [...ids(first.messages), ...ids(second.messages)];
    expect(union).toEqual(range(1, total));
    const contents = [...first.messages, ...second.messages].filter((m) => m.id !== undefined).map((m) => JSON.parse(m.data).seq);
    expect(contents).toEqual(range(1, total));
  });

  it('starts after ?after_seq=, and Last-Event-ID wins over it', async () => {
    const id = await createConversation();
    for (let i = 1; i <= 30; i++) append(id, `e${i}`);
    const afterSeq = await stream(`/conversations/${id}/events/stream?after_seq=25`);
    await afterSeq.waitFor((m) => lastId(m) === 30);
    expect(ids(afterSeq.messages)).toEqual(range(26, 30));
    const both = await stream(`/conversations/${id}/events/stream?after_seq=5`, { ...server.auth, 'last-event-id': '28' });
    await both.waitFor((m) => lastId(m) === 30);
    expect(ids(both.messages)).toEqual([29, 30]);
    const bad = await fetch(`${server.url}/conversations/${id}/events/stream`, { headers: { ...server.auth, 'last-event-id': 'abc' } });
    expect(bad.status).toBe(400);
  });

  it('accepts ?access_token= (EventSource cannot send headers) and refuses a wrong one', async () => {
    const id = await createConversation();
    append(id, 'hello');
    const sse = await stream(`/conversations/${id}/events/stream?access_token=${TEST_KEY}`, {});
    await sse.waitFor((m) => lastId(m) === 1);
    expect((await fetch(`${server.url}/conversations/${id}/events/stream?access_token=nope`)).status).toBe(401);
    expect((await fetch(`${server.url}/events/stream?access_token=nope`)).status).toBe(401);
  });

  it('sends heartbeat comments, and streaming-only deltas without an id', async () => {
    const id = await createConversation();
    const sse = await stream(`/conversations/${id}/events/stream`);
    const deadline = Date.now() + 5000;
    while (sse.comments.filter((comment) => comment === 'heartbeat').length < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(sse.comments.filter((comment) => comment === 'heartbeat').length).toBeGreaterThanOrEqual(3);
    expect(sse.messages).toEqual([]);
    server.services.recorder.delta({ kind: 'message_delta', conversation_id: id, run_id: null, content_delta: 'Hel' });
    append(id, 'after the delta');
    await sse.waitFor((m) => lastId(m) === 1);
    expect(sse.messages[0]).toEqual({ event: 'message_delta', data: expect.stringContaining('"content_delta":"Hel"') });
    expect(sse.messages[0]!.id).toBeUndefined();
  });

  it('ends with stream_closed when the conversation is deleted; 404 for an unknown one', async () => {
    const id = await createConversation();
    append(id, 'x');
    const sse = await stream(`/conversations/${id}/events/stream`);
    await sse.waitFor((m) => lastId(m) === 1);
    const deleted = await fetch(`${server.url}/conversations/${id}`, { method: 'DELETE', headers: server.auth });
    expect(deleted.status).toBe(204);
    await sse.ended;
    expect(sse.messages.at(-1)).toMatchObject({ event: 'stream_closed' });
    expect(JSON.parse(sse.messages.at(-1)!.data)).toMatchObject({ reason: 'conversation_deleted' });
    const unknown = await fetch(`${server.url}/conversations/${id}/events/stream`, { headers: server.auth });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: 'conversation_not_found' });
  });
});

describe('firehose', () => {
  it('streams every conversation with global cursor ids, and resumes from one', async () => {
    const own = await startServer();
    try {
      const a = await createConversation(own);
      const b = await createConversation(own);
      for (let i = 0; i < 10; i++) append(i % 3 === 0 ? b : a, `h${i}`, own);
      const first = await stream('/events/stream', own.auth, own);
      await first.waitFor((m) => lastId(m) === 10);
      for (let i = 10; i < 20; i++) append(i % 2 === 0 ? a : b, `l${i}`, own);
      await first.waitFor((m) => lastId(m) === 20);
      expect(ids(first.messages)).toEqual(range(1, 20));
      const events = first.messages.map((m) => JSON.parse(m.data) as { conversation_id: string; seq: number; content: string });
      expect(events.map((e) => e.content)).toEqual([...range(0, 9).map((i) => `h${i}`), ...range(10, 19).map((i) => `l${i}`)]);
      for (const id of [a, b]) {
        const seqs = events.filter((e) => e.conversation_id === id).map((e) => e.seq);
        expect(seqs).toEqual(range(1, seqs.length));
      }
      first.close();

      const resumed = await stream('/events/stream', { ...own.auth, 'last-event-id': '13' }, own);
      append(a, 'after resume', own);
      await resumed.waitFor((m) => lastId(m) === 21);
      expect(ids(resumed.messages)).toEqual(range(14, 21));
      expect(resumed.messages.slice(0, 7).map((m) => m.data)).toEqual(first.messages.slice(13).map((m) => m.data));
    } finally {
      await own.close();
      fs.rmSync(own.dataDir, { recursive: true, force: true });
    }
  });
});

/** An SSE client that stops reading after the response head: its kernel buffers fill, then the server's. */
function stalledClient(url: string): Promise<{ readAll: () => Promise<string> }> {
  return new Promise((resolve, reject) => {
    const request = http.get(url, { headers: { authorization: `Bearer ${TEST_KEY}`, accept: 'text/event-stream' } }, (response) => {
      resolve({
        readAll: () =>
          new Promise((done) => {
            let text = '';
            response.setEncoding('utf8');
            response.on('data', (chunk: string) => (text += chunk));
            response.on('end', () => done(text));
            response.on('close', () => done(text));
          }),
      });
    });
    request.on('error', reject);
  });
}

describe('a slow subscriber', () => {
  it('overflows its bounded buffer and is cut off while another subscriber gets everything; it resumes with Last-Event-ID', async () => {
    const own = await startServer({ env: { AGENTD_SSE_MAX_BUFFERED: '20' } });
    try {
      const id = await createConversation(own);
      const slow = await stalledClient(`${own.url}/conversations/${id}/events/stream`);
      const fast = await stream(`/conversations/${id}/events/stream`, own.auth, own);
      const deadline = Date.now() + 5000;
      while (own.services.streams.liveCount < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(own.services.streams.liveCount).toBe(2);

      const total = 250;
      const big = 'x'.repeat(64 * 1024);
      let reading: Promise<string> | undefined;
      for (let n = 1; n <= total; n += 5) {
        for (let k = n; k < n + 5 && k <= total; k++) append(id, `${k} ${big}`, own);
        await fast.waitFor((m) => lastId(m) >= Math.min(n + 4, total), 20_000);
        // Once the slow one is dropped (unsubscribed), it reads again, in time to get the notice.
        if (!reading && own.services.streams.liveCount < 2) reading = slow.readAll();
      }
      expect(ids(fast.messages)).toEqual(range(1, total));
      expect(fast.messages.some((m) => m.event === 'stream_overflow')).toBe(false);
      expect(reading, 'the slow subscriber overflowed').toBeDefined();

      const raw = await reading!;
      const slowIds = completeIds(raw);
      expect(slowIds.length, 'the slow subscriber was cut off before the end').toBeLessThan(total);
      expect(slowIds).toEqual(range(1, slowIds.length));
      const overflow = /event: stream_overflow\ndata: (.*)\n/.exec(raw);
      expect(overflow, 'the slow subscriber is told why').not.toBeNull();
      expect(JSON.parse(overflow![1]!)).toMatchObject({ reason: 'subscriber_too_slow', resume_after: String(slowIds.length) });
      expect(raw.trimEnd().endsWith('}')).toBe(true);

      const resumed = await stream(`/conversations/${id}/events/stream`, { ...own.auth, 'last-event-id': String(slowIds.length) }, own);
      await resumed.waitFor((m) => lastId(m) === total, 20_000);
      expect([...slowIds, ...ids(resumed.messages)]).toEqual(range(1, total));
    } finally {
      await own.close();
      fs.rmSync(own.dataDir, { recursive: true, force: true });
    }
  });
});

/** The ids of the complete messages (ended by a blank line) in raw SSE text. */
function completeIds(raw: string): number[] {
  return raw
    .split('\n\n')
    .slice(0, -1)
    .flatMap((block) => [.../^id: (\d+)$/m.exec(block) ?? []].slice(1).map(Number));
}

describe('a subscriber that stops reading', () => {
  it('is disconnected once its buffer overflows, instead of holding the connection forever', async () => {
    const own = await startServer({ env: { AGENTD_SSE_MAX_BUFFERED: '20' } });
    try {
      const id = await createConversation(own);
      const stalled = await stalledClient(`${own.url}/conversations/${id}/events/stream`);
      while (own.services.streams.liveCount < 1) await new Promise((resolve) => setTimeout(resolve, 10));
      const total = 250;
      const big = 'y'.repeat(64 * 1024);
      for (let k = 1; k <= total; k++) {
        append(id, `${k} ${big}`, own);
        await new Promise((resolve) => setImmediate(resolve));
      }
      const deadline = Date.now() + 10_000;
      while (own.services.streams.size > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(own.services.streams.size, 'the server let go of the stalled subscriber').toBe(0);

      const received = completeIds(await stalled.readAll());
      expect(received.length).toBeGreaterThan(0);
      expect(received.length).toBeLessThan(total);
      expect(received).toEqual(range(1, received.length));
      const resumed = await stream(`/conversations/${id}/events/stream`, { ...own.auth, 'last-event-id': String(received.length) }, own);
      await resumed.waitFor((m) => lastId(m) === total, 20_000);
      expect(ids(resumed.messages)).toEqual(range(received.length + 1, total));
    } finally {
      await own.close();
      fs.rmSync(own.dataDir, { recursive: true, force: true });
    }
  });
});

describe('shutdown', () => {
  it('ends open streams when the server closes', async () => {
    const own = await startServer();
    const id = await createConversation(own);
    const conversation = await stream(`/conversations/${id}/events/stream`, own.auth, own);
    const firehose = await stream('/events/stream', own.auth, own);
    append(id, 'x', own);
    await conversation.waitFor((m) => lastId(m) === 1);
    await firehose.waitFor((m) => lastId(m) === 1);
    await own.close();
    await Promise.all([conversation.ended, firehose.ended]);
    for (const sse of [conversation, firehose]) {
      expect(sse.messages.at(-1)).toMatchObject({ event: 'stream_closed' });
      expect(JSON.parse(sse.messages.at(-1)!.data)).toMatchObject({ reason: 'server_shutting_down' });
    }
  });
});
