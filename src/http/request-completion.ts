import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';

/**
 * Fastify's log controller with one line of its own per request: `requestCompleted`, which Fastify
 * calls once each response has finished (or failed), hands the request to `completed` (app.ts:
 * metrics and the request line). Every other line the controller would write for a request
 * (incoming, errors the default handler logs) stays off. An onResponse hook did this before: the
 * same moment, at the price of Fastify's hook runner on every request.
 */
export class RequestCompletion extends LogController {
  constructor(private readonly completed: (request: FastifyRequest, reply: FastifyReply) => void) {
    super({ disableRequestLogging: true });
  }

  override requestCompleted(_error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    this.completed(request, reply);
  }
}
