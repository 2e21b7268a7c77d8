/**
 * SSE as bytes on the wire. Batches of frames are encoded once for all subscribers and written
 * straight to each socket as HTTP/1.1 chunks (src/http/sse-writer.ts), and subscribers are woken
 * a slice at a time across event-loop turns (core/events/event-subscription.ts): these tests read
 * raw sockets and check the framing strictly, for HTTP/1.1 and HTTP/1.0 clients, a stream queued
 * behind another response on the same connection, and many subscribers at once.
 */
import fs from 'node:fs';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, TEST_KEY, type TestServer } from '../support/agentd.js';
import { rawConnection, sseMessages, type RawConnection, type WireResponse } from '../support/raw-stream.js';
import { requestJson } from '../support/json-api.js';

let server: TestServer;
const open: RawConnection[] = [];

beforeAll(async () => {
  server = await startServer({ env: { AGENTD_SSE_HEARTBEAT_S: '0.05' } });
});
afterAll(async () => {
  for (const connection of open) connection.destroy();
  await server?.close();
  if (server) fs.rmSync(server.dataDir, { recursive: true, force: true });
});

async function createConversation(): Promise<string> {
  return (await server.services.conversations.create({ max_iterations_per_run: 500, confirmation_mode: false })).conversation.id;
}

function append(id: string, content: string) {
  return server.services.conversations.append(id, { kind: 'message', source: 'user', role: 'user', content });
}

function request(path: string, version = '1.1'): string {
  return `GET ${path} HTTP/${version}\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TEST_KEY}\r\nAccept: text/event-stream\r\n\r\n`;
}

async function connect(requests: string): Promise<RawConnection> {
  const connection = await rawConnection(server.url, requests);
  open.push(connection);
  return connection;
}

const ids = (response: WireResponse | undefined) => (response ? sseMessages(response.body).filter((m) => m.id !== undefined).map((m) => Number(m.id)) : []);
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const heartbeats = (response: WireResponse | undefined) => response?.body.split(': heartbeat\n\n').length ?? 0;

async function deleteConversation(id: string): Promise<void> {
  expect((await requestJson(server, 'DELETE', `/conversations/${id}`)).status).toBe(204);
}

describe('an HTTP/1.1 stream', () => {
  it('is one well-formed chunked body: history, live bursts and heartbeats interleaved, then the terminating chunk', async () => {
    const id = await createConversation();
    for (let k = 1; k <= 3; k++) await append(id, `history ${k}`);
    const connection = await connect(request(`/conversations/${id}/events/stream`));
    await connection.waitFor((responses) => ids(responses[0]).length === 3);
    let total = 3;
    for (let burst = 1; burst <= 8; burst++) {
      const seenHeartbeats = heartbeats(connection.responses()[0]);
      for (let k = 0; k < burst; k++) void append(id, `live ${++total} ${'x'.repeat(burst * 500)}`);
      const expected = total;
      // Each burst arrives whole, and a heartbeat comes between bursts.
      await connection.waitFor((responses) => ids(responses[0]).length === expected && heartbeats(responses[0]) > seenHeartbeats);
    }
    await deleteConversation(id);
    const [response] = await connection.waitFor((responses) => responses[0]?.complete === true);
    expect(response!.status).toBe(200);
    expect(response!.headers['content-type']).toBe('text/event-stream');
    expect(response!.headers['transfer-encoding']).toBe('chunked');
    expect(response!.chunks.at(-1)).toBe(0);
    expect(response!.chunks.slice(0, -1).every((size) => size > 0)).toBe(true);
    const messages = sseMessages(response!.body);
    expect(ids(response)).toEqual(range(1, total));
    for (const message of messages.filter((m) => m.id !== undefined)) expect(JSON.parse(message.data)).toMatchObject({ seq: Number(message.id), conversation_id: id, kind: 'message' });
    expect(messages.at(-1)).toMatchObject({ event: 'stream_closed' });
    expect(response!.body.startsWith('retry: 2000\n\n')).toBe(true);
  });
});

describe('heartbeats', () => {
  it('come to an idle stream, and not to one busy with events', { timeout: 30_000 }, async () => {
    const idle = await connect(request(`/conversations/${await createConversation()}/events/stream`));
    const busyId = await createConversation();
    const busy = await connect(request(`/conversations/${busyId}/events/stream`));
    await Promise.all([idle, busy].map((connection) => connection.waitFor((responses) => responses[0]?.body.startsWith('retry:') === true)));
    const before = [idle, busy].map((connection) => heartbeats(connection.responses()[0]));
    // An event every 10 ms (a fifth of the 50 ms interval) until the idle stream has had 20 more heartbeats.
    let sent = 0;
    while (heartbeats(idle.responses()[0]) < before[0]! + 20) {
      await append(busyId, `busy ${++sent}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await busy.waitFor((responses) => ids(responses[0]).length === sent);
    const busyBeats = heartbeats(busy.responses()[0]) - before[1]!;
    expect(busyBeats, `${busyBeats} heartbeats while ${sent} events came`).toBeLessThan(10);
    idle.destroy();
    busy.destroy();
  });
});

describe('an HTTP/1.0 stream', () => {
  it('gets the same frames without chunked framing, and the connection closes when the stream ends', async () => {
    const id = await createConversation();
    await append(id, 'before');
    const connection = await connect(request(`/conversations/${id}/events/stream`, '1.0'));
    await connection.waitFor((responses) => ids(responses[0]).length === 1);
    for (let k = 2; k <= 40; k++) void append(id, `live ${k}`);
    await connection.waitFor((responses) => ids(responses[0]).length === 40);
    await deleteConversation(id);
    await connection.closed;
    const [response] = connection.responses();
    expect(response!.headers['transfer-encoding']).toBeUndefined();
    expect(response!.complete).toBe(true);
    expect(ids(response)).toEqual(range(1, 40));
    expect(sseMessages(response!.body).at(-1)).toMatchObject({ event: 'stream_closed' });
    expect(response!.body).not.toMatch(/\r\n[0-9a-f]+\r\n/);
  });
});

describe('a stream queued behind another response on the same connection (pipelined requests)', () => {
  it('holds its frames until that response ends, then gets every event in order, chunked', async () => {
    const first = await createConversation();
    const second = await createConversation();
    // Two streams pipelined on one connection: the second waits for the first to end.
    const connection = await connect(request(`/conversations/${first}/events/stream`) + request(`/conversations/${second}/events/stream`));
    await append(first, 'first');
    await connection.waitFor((responses) => ids(responses[0]).length === 1);
    // Events of the second stream while it waits, past the response's buffer (16 KiB): its writer waits for 'drain'.
    const big = 'q'.repeat(8 * 1024);
    for (let k = 1; k <= 6; k++) await append(second, `queued ${k} ${big}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(connection.responses()).toHaveLength(1);
    await deleteConversation(first);
    const responses = await connection.waitFor((decoded) => ids(decoded[1]).length === 6);
    expect(responses[0]!.complete).toBe(true);
    expect(sseMessages(responses[0]!.body).at(-1)).toMatchObject({ event: 'stream_closed' });
    // Now the second stream is the connection's current response: live events go straight to the socket.
    for (let k = 7; k <= 30; k++) void append(second, `live ${k}`);
    await connection.waitFor((decoded) => ids(decoded[1]).length === 30);
    await deleteConversation(second);
    const [, last] = await connection.waitFor((decoded) => decoded[1]?.complete === true);
    expect(last!.status).toBe(200);
    expect(last!.headers['transfer-encoding']).toBe('chunked');
    expect(ids(last)).toEqual(range(1, 30));
    expect(sseMessages(last!.body).map((m) => m.data).filter((data) => data.includes('"queued ')).length).toBe(6);
  });
});

describe('many subscribers', () => {
  it('each gets every event exactly once, in order, through bursts, single events and others leaving', { timeout: 60_000 }, async () => {
    const id = await createConversation();
    const count = 150; // more than are woken in one event-loop turn
    const others = server.services.streams.size;
    const subscribers = await Promise.all(Array.from({ length: count }, () => connect(request(`/conversations/${id}/events/stream`))));
    const globalBefore = await server.services.events.firehoseHead();
    const firehose = await connect(request(`/events/stream?after_seq=${globalBefore}`));
    const deadline = Date.now() + 20_000;
    while (server.services.streams.liveCount < others + count + 1 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(server.services.streams.liveCount).toBe(others + count + 1);

    let total = 0;
    const allHave = (connections: RawConnection[], n: number) => Promise.all(connections.map((connection) => connection.waitFor((responses) => ids(responses[0]).length >= n, 20_000)));
    for (let round = 1; round <= 12; round++) {
      // A burst in one turn, a few turns of one event each, then a wait for everyone.
      for (let k = 0; k < round * 3; k++) void append(id, `burst ${round} event ${++total}`);
      for (let k = 0; k < 3; k++) {
        void append(id, `single ${++total}`);
        await nextTurn();
      }
      if (round === 6) {
        // A third of the subscribers leave mid-stream; the server lets go of their streams.
        const leaving = subscribers.splice(0, count / 3);
        for (const connection of leaving) connection.destroy();
        const released = Date.now() + 10_000;
        while (server.services.streams.size > others + subscribers.length + 1 && Date.now() < released) await new Promise((resolve) => setTimeout(resolve, 10));
        expect(server.services.streams.size).toBe(others + subscribers.length + 1);
      }
      if (round % 4 === 0) await allHave(subscribers, total);
    }
    await allHave([...subscribers, firehose], total);
    for (const connection of subscribers) {
      const [response] = connection.responses();
      expect(ids(response)).toEqual(range(1, total));
      expect(response!.chunks.every((size) => size > 0)).toBe(true);
    }
    const [firehoseResponse] = firehose.responses();
    expect(ids(firehoseResponse)).toEqual(range(globalBefore + 1, globalBefore + total));
    expect(sseMessages(firehoseResponse!.body).map((m) => (JSON.parse(m.data) as { seq: number }).seq)).toEqual(range(1, total));
  });
});
