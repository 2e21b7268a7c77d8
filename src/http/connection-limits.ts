import type { Server } from 'node:http';
import type { Socket } from 'node:net';

export interface ConnectionLimits {
  /** Open connections in all (0: no cap): Node closes the ones past it (server.maxConnections). */
  max: number;
  /** Open connections per remote address (0: no cap). */
  perClient: number;
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
}

const REFUSAL_BODY = JSON.stringify({
  error: 'too_many_connections',
  message: 'This client has too many open connections to the server; close some and retry.',
  details: null,
});
const REFUSAL = [
  'HTTP/1.1 503 Service Unavailable',
  'Content-Type: application/json; charset=utf-8',
  `Content-Length: ${Buffer.byteLength(REFUSAL_BODY)}`,
  'Retry-After: 1',
  'Connection: close',
  '',
  REFUSAL_BODY,
].join('\r\n');

/**
 * Caps what one client can hold of the server's descriptors. A connection past its address's cap
 * is answered at once with a 503 in the contract's error shape and closed, before any parsing:
 * cheap, and the clients under their cap keep being served. Long-lived SSE streams count as one
 * connection each, like any other. Headers must arrive within `headersTimeoutMs` (slow or silent
 * connections do not linger); idle keep-alive connections close after `keepAliveTimeoutMs`.
 */
export function limitConnections(server: Server, limits: ConnectionLimits): { openFor(address: string): number } {
  if (limits.max > 0) server.maxConnections = limits.max;
  server.headersTimeout = limits.headersTimeoutMs;
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  const open = new Map<string, number>();
  if (limits.perClient > 0) {
    // The HTTP parser (Node's own 'connection' listeners) only ever sees admitted connections.
    const handlers = server.listeners('connection') as ((socket: Socket) => void)[];
    server.removeAllListeners('connection');
    server.on('connection', (socket: Socket) => {
      const address = socket.remoteAddress ?? 'unknown';
      const count = (open.get(address) ?? 0) + 1;
      if (count > limits.perClient) {
        socket.on('error', () => undefined);
        socket.end(REFUSAL, () => socket.destroy());
        return;
      }
      open.set(address, count);
      socket.once('close', () => {
        const left = (open.get(address) ?? 1) - 1;
        if (left <= 0) open.delete(address);
        else open.set(address, left);
      });
      for (const handler of handlers) handler.call(server, socket);
    });
  }
  return { openFor: (address) => open.get(address) ?? 0 };
}
