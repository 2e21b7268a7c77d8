/**
 * One client watching a conversation's SSE stream from a process of its own, as a dashboard
 * does (P1): the server pays for writing each event to it, not for the client's reading. Read
 * as bytes (SseResponseReader), each `id:` line checked to follow the one before.
 *
 * Messages from the parent: watch → (watching); count → (counted); stop.
 */
import net from 'node:net';
import { SseResponseReader } from '../support/sse-reader.js';

export type SseWatcherRequest = { type: 'watch'; url: string; headers: Record<string, string> } | { type: 'count' } | { type: 'stop' };
export type SseWatcherReply = { type: 'watching' } | { type: 'counted'; ids: number; faults: string[] } | { type: 'failed'; message: string };

let socket: net.Socket | undefined;
let ids = 0;
let lastId = 0;
const faults: string[] = [];

function send(reply: SseWatcherReply): void {
  process.send!(reply);
}

function watch(target: string, headers: Record<string, string>): void {
  const url = new URL(target);
  socket = net.connect(Number(url.port), url.hostname);
  const reader = new SseResponseReader(
    {
      onId: (id) => {
        if (id !== lastId + 1) faults.push(`id ${id} after ${lastId}`);
        lastId = id;
        ids += 1;
      },
      onFault: (fault) => faults.push(fault),
    },
    (status) => send(status === 200 ? { type: 'watching' } : { type: 'failed', message: `stream answered ${status}` }),
  );
  const lines = Object.entries({ host: url.host, accept: 'text/event-stream', ...headers }).map(([name, value]) => `${name}: ${value}\r\n`);
  socket.write(`GET ${url.pathname}${url.search} HTTP/1.1\r\n${lines.join('')}\r\n`);
  socket.on('data', (chunk: Buffer) => reader.push(chunk));
  socket.on('error', (error) => send({ type: 'failed', message: error.message }));
}

process.on('message', (message: SseWatcherRequest) => {
  if (message.type === 'watch') watch(message.url, message.headers);
  else if (message.type === 'count') send({ type: 'counted', ids, faults: faults.slice(0, 20) });
  else {
    socket?.destroy();
    process.exit(0);
  }
});
