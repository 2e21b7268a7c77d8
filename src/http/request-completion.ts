import type { FastifyReply } from 'fastify';
import { performance } from 'node:perf_hooks';

/** A request that ended: its reply (which holds the request), its route's pattern (or `unmatched`) and how long it took, in ms. */
export type Completed = (reply: FastifyReply, route: string, ms: number) => void;

/**
 * Hands each request to `completed` once its response has finished (app.ts: the audit trail,
 * metrics and the request line). The function it returns is called as the request comes in (the first onRequest
 * hook): from then on, whatever answers it (a route, a hook's 401, the 404 handler, an error)
 * ends in one call.
 *
 * Fastify is given no logger: with one, it makes a child logger for every request, and puts two
 * listeners on every response and takes them off again, to time it and call its log controller.
 * Here, one listener for both events, left on (the response is done with). A response that fails
 * instead of finishing (written to after its end) is counted too, and its error then goes nowhere
 * further: it has been answered.
 */
export function requestCompletion(completed: Completed): (reply: FastifyReply, route: string) => void {
  return (reply, route) => {
    const started = performance.now();
    let ended = false;
    const onEnd = () => {
      if (ended) return;
      ended = true;
      completed(reply, route, performance.now() - started);
    };
    reply.raw.on('finish', onEnd);
    reply.raw.on('error', onEnd);
  };
}
