/**
 * Requests about a conversation reach the instance that holds its lease: this hook (after
 * authentication) asks Ownership where the conversation is served and, when that is another
 * instance, relays the request there as it came (method, headers, body stream) and the answer
 * back as it comes. Event pages and SSE streams are served by any instance: the log is the
 * shared database, and every instance's tail sees every event.
 */
import { pipeline } from 'node:stream/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { request as undiciRequest } from 'undici';
import type { Ownership } from './ownership.js';
import { OwnerUnavailableError } from './ownership.js';

const FORWARDED = 'x-agentd-forwarded-by';
/** Routes any instance serves from the shared log. */
const SERVED_ANYWHERE = new Set(['/conversations/:id/events', '/conversations/:id/events/count', '/conversations/:id/events/:event_id', '/conversations/:id/events/stream']);
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer', 'host']);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function registerForwarding(app: FastifyInstance, ownership: Ownership): void {
  app.addHook('onRequest', async (request, reply) => {
    const route = request.routeOptions.url;
    if (!route?.startsWith('/conversations/:id') || (request.method === 'GET' && SERVED_ANYWHERE.has(route))) return;
    const id = (request.params as { id?: unknown }).id;
    if (typeof id !== 'string' || !UUID.test(id)) return;
    const where = await ownership.route(id.toLowerCase());
    if (where.local) return;
    // Forwarded once at most: an owner that does not serve it itself means it just lost it.
    if (request.headers[FORWARDED]) throw new OwnerUnavailableError(id);
    ownership.stats.forwarded++;
    await relay(request, reply, where.url, ownership.id, id);
  });
}

async function relay(request: FastifyRequest, reply: FastifyReply, base: string, self: string, id: string): Promise<void> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(request.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
  headers[FORWARDED] = self;
  const hasBody = request.method !== 'GET' && request.method !== 'HEAD' && (request.headers['content-length'] !== undefined || request.headers['transfer-encoding'] !== undefined);
  let answer: Awaited<ReturnType<typeof undiciRequest>>;
  try {
    answer = await undiciRequest(`${base}${request.url}`, { method: request.method as 'GET', headers, body: hasBody ? request.raw : null, headersTimeout: 60_000, bodyTimeout: 0 });
  } catch (error) {
    request.log.warn({ err: error, owner: base }, 'forwarding to the conversation\'s instance failed');
    throw new OwnerUnavailableError(id);
  }
  reply.hijack();
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  reply.raw.writeHead(answer.statusCode, out);
  // The client going away ends the relay; so does the owner's answer ending.
  request.raw.once('close', () => answer.body.destroy());
  await pipeline(answer.body, reply.raw).catch(() => reply.raw.destroy());
}
