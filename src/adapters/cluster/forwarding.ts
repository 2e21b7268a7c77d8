/**
 * Requests about a conversation reach the instance that holds its lease: this hook (after
 * authentication) asks Ownership where the conversation is served and, when that is another
 * instance, relays the request there as it came (method, headers, body stream) and the answer
 * back as it comes. Event pages and SSE streams are served by any instance: the log is the
 * shared database, and every instance's tail sees every event. The conversation list is served
 * by any instance from its replica, after a read barrier (Replica.settled).
 *
 * A holder that stops answering does not hold a request for long:
 * - nothing listens at its address (it died): once it is declared dead, its lease is taken and
 *   the request served here (the request never left, whatever its body);
 * - it accepts connections but its heartbeat stops for a lease's time (stopped, hung): the relay
 *   is abandoned and its lease taken here once it runs out (the holder, should it wake, is fenced
 *   out); then a request without a body is served here, and one with a body (which the holder
 *   may have read) is answered 503 owner_unavailable with Retry-After, to be sent again.
 */
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { request as undiciRequest } from 'undici';
import { loadUndici } from '../web/lazy-undici.js';
import { isRefused } from './address-probe.js';
import type { Ownership } from './ownership.js';
import { OwnerUnavailableError, RetryLaterError } from './ownership.js';

const FORWARDED = 'x-agentd-forwarded-by';
/** Routes any instance serves from the shared log. */
const SERVED_ANYWHERE = new Set(['/conversations/:id/events', '/conversations/:id/events/count', '/conversations/:id/events/:event_id', '/conversations/:id/events/stream']);
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer', 'host']);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type Outcome = 'relayed' | 'refused' | 'silent';

export function registerForwarding(app: FastifyInstance, ownership: Ownership): void {
  app.addHook('onRequest', async (request, reply) => {
    const route = request.routeOptions.url;
    if (request.method === 'GET' && route === '/conversations') return ownership.replica.settled();
    if (!route?.startsWith('/conversations/:id')) return;
    const raw = (request.params as { id?: unknown }).id;
    if (typeof raw !== 'string' || !UUID.test(raw)) return;
    const id = raw.toLowerCase();
    if (request.method === 'GET' && SERVED_ANYWHERE.has(route)) {
      // Created (or changed) on another instance a moment ago: this one's view catches up first.
      if (!ownership.knows(id)) await ownership.replica.settled();
      return;
    }
    try {
      for (let attempt = 0; ; attempt++) {
        const where = await ownership.route(id);
        if (where.local) return;
        // Forwarded once at most: an owner that does not serve it itself means it just lost it.
        if (request.headers[FORWARDED]) throw new OwnerUnavailableError(id, await ownership.retryAfterS(id));
        ownership.stats.forwarded++;
        const outcome = await relay(request, reply, where, ownership, id);
        if (outcome === 'relayed') return;
        if (attempt === 0 && outcome === 'refused' && (await ownership.awaitDeath(where.owner))) continue;
        if (attempt === 0 && outcome === 'silent' && !hasBody(request)) continue;
        if (outcome === 'silent') {
          // The stopped holder may have read this request and carry it out when it wakes: its
          // lease is taken first (once it runs out), so that it is fenced out by then, and the
          // client's retry is served at once.
          const now = await ownership.route(id).catch(() => null);
          if (now && (now.local || now.owner !== where.owner)) throw new OwnerUnavailableError(id, 1);
        }
        throw new OwnerUnavailableError(id, await ownership.retryAfterS(id, where.owner));
      }
    } catch (error) {
      if (error instanceof RetryLaterError && !reply.sent) void reply.header('retry-after', String(error.retryAfterS));
      throw error;
    }
  });
}

function hasBody(request: FastifyRequest): boolean {
  return request.method !== 'GET' && request.method !== 'HEAD' && (request.headers['content-length'] !== undefined || request.headers['transfer-encoding'] !== undefined);
}

async function relay(request: FastifyRequest, reply: FastifyReply, where: { url: string; owner: string }, ownership: Ownership, id: string): Promise<Outcome> {
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(request.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
  headers[FORWARDED] = ownership.id;
  // The answer may take long (a command runs up to an hour): no time limit while the holder's heartbeat goes on.
  const controller = new AbortController();
  const watch = setInterval(() => {
    void ownership.answers(where.owner).then(
      (alive) => alive || controller.abort('silent'),
      () => {},
    );
  }, ownership.beatMs);
  const gone = () => controller.abort('client');
  reply.raw.once('close', gone);
  // The body is read only once the connection is open: refused, the request is still whole here.
  let bodyRead = false;
  const body = hasBody(request)
    ? Readable.from(
        (async function* () {
          bodyRead = true;
          for await (const chunk of request.raw) yield chunk as Buffer;
        })(),
        { objectMode: false },
      )
    : null;
  let answer: Awaited<ReturnType<typeof undiciRequest>>;
  try {
    answer = await (await loadUndici()).request(`${where.url}${pathAndQuery(request.url)}`, { method: request.method as 'GET', headers, body, headersTimeout: 0, bodyTimeout: 0, signal: controller.signal });
  } catch (error) {
    if (controller.signal.reason === 'silent') {
      request.log.warn({ owner: where.url }, "the conversation's instance stopped answering: request abandoned");
      return 'silent';
    }
    if (isRefused(error)) return bodyRead ? 'silent' : 'refused';
    request.log.warn({ err: error, owner: where.url }, "forwarding to the conversation's instance failed");
    throw new OwnerUnavailableError(id, await ownership.retryAfterS(id, where.owner));
  } finally {
    clearInterval(watch);
    reply.raw.off('close', gone);
  }
  reply.hijack();
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(answer.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  reply.raw.writeHead(answer.statusCode, out);
  // The client going away ends the relay; so does the owner's answer ending.
  reply.raw.once('close', () => answer.body.destroy());
  await pipeline(answer.body, reply.raw).catch(() => reply.raw.destroy());
  return 'relayed';
}

/**
 * The target's path and query only: a request in absolute form (`GET http://host/path`) names a
 * host of the client's choosing, and the owner is reached by its own address, never that one.
 */
function pathAndQuery(target: string): string {
  if (target.startsWith('/')) return target;
  const url = new URL(target, 'http://forwarded.invalid');
  return `${url.pathname}${url.search}`;
}
