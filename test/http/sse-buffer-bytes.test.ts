/**
 * Issue: the per-subscriber buffer counted events, not bytes: one paused socket and 300 messages
 * of 1 MB held +550 MB. With AGENTD_SSE_MAX_BUFFERED_BYTES, a reader that stops reading is cut
 * off once its backlog passes the cap, and the server lets go of its stream.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, TEST_KEY, type TestServer } from '../support/agentd.js';

let server: TestServer;
const CAP = 1024 * 1024;

beforeAll(async () => {
  server = await startServer({ env: { AGENTD_SSE_MAX_BUFFERED_BYTES: String(CAP), AGENTD_SSE_HEARTBEAT_S: '15' } });
});
afterAll(async () => {
  await server.close();
});

describe('a stalled SSE reader holds a bounded amount of memory', () => {
  it('is disconnected once its backlog passes AGENTD_SSE_MAX_BUFFERED_BYTES, long before the event count cap', { timeout: 60_000 }, async () => {
    const headers = { ...server.auth, 'content-type': 'application/json' };
    const { id } = (await (await fetch(`${server.url}/conversations`, { method: 'POST', headers, body: '{}' })).json()) as { id: string };
    const { port } = new URL(server.url);
    const socket = net.connect(Number(port), '127.0.0.1');
    let received = '';
    let closed = false;
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('close', () => (closed = true));
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write(`GET /conversations/${id}/events/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TEST_KEY}\r\nAccept: text/event-stream\r\n\r\n`);
    const until = Date.now() + 10_000;
    while (!received.includes('retry:') && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(received).toContain('200 OK');
    expect(server.services.streams.size).toBe(1);
    socket.pause(); // the reader stops reading: the kernel's buffers fill, then the server's

    // 150 messages of 100 KB (15 MB): far past the socket buffers and the 1 MiB cap, far below 10,000 events.
    const content = 'm'.repeat(100_000);
    for (let i = 0; i < 150 && server.services.streams.size > 0; i++) {
      const response = await fetch(`${server.url}/conversations/${id}/messages`, { method: 'POST', headers, body: JSON.stringify({ content, run: false }) });
      expect(response.status).toBe(202);
    }
    // The server let go of the stream (it ends the connection after a short grace for the notice).
    const released = Date.now() + 15_000;
    while (server.services.streams.size > 0 && Date.now() < released) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(server.services.streams.size).toBe(0);
    socket.resume();
    const ended = Date.now() + 15_000;
    while (!closed && Date.now() < ended) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(closed).toBe(true);
    // It never got the whole backlog: it was cut off, not served 15 MB.
    expect(received.length).toBeLessThan(150 * 100_000);
    socket.destroy();
  });
});
