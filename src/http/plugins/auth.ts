import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ErrorBody } from './errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route answers without a key (/alive, /health, /openapi.json). */
    public?: boolean;
    /** The route also accepts `?access_token=` (SSE streams: EventSource cannot send headers). */
    queryToken?: boolean;
  }
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** Constant-time check against every configured key (rotation: several may be valid at once). */
export function createKeyChecker(keys: readonly string[]): (candidate: string) => boolean {
  const digests = keys.map(digest);
  // Keys that passed the constant-time check, so that a client's every request does not hash its
  // key again. A set lookup compares strings only on a hash collision: it tells a guesser nothing.
  const accepted = new Set<string>();
  return (candidate) => {
    if (accepted.has(candidate)) return true;
    const probe = digest(candidate);
    let ok = false;
    for (const key of digests) ok = timingSafeEqual(probe, key) || ok;
    if (ok && accepted.size < 16) accepted.add(candidate);
    return ok;
  };
}

function presentedKey(request: FastifyRequest, allowQuery: boolean): string | undefined {
  const header = request.headers.authorization;
  if (typeof header === 'string') {
    const match = /^Bearer\s+(.+)$/i.exec(header.trim());
    return match ? match[1]!.trim() : undefined;
  }
  if (allowQuery) {
    const token = (request.query as Record<string, unknown> | undefined)?.access_token;
    if (typeof token === 'string' && token.length > 0) return token;
  }
  return undefined;
}

export function registerAuth(app: FastifyInstance, options: { keys: readonly string[]; isPublicPath?: (path: string) => boolean }): void {
  const check = createKeyChecker(options.keys);
  // A callback hook, not an async one: every request passes here, and a promise per request is not free.
  app.addHook('onRequest', (request, reply, done) => {
    const config = request.routeOptions.config;
    if (config?.public) return done();
    const query = request.url.indexOf('?');
    const path = query === -1 ? request.url : request.url.slice(0, query);
    if (options.isPublicPath?.(path)) return done();
    const key = presentedKey(request, config?.queryToken === true);
    if (key !== undefined && check(key)) return done();
    const body: ErrorBody = {
      error: 'unauthorized',
      message: key === undefined ? 'Send the API key as "Authorization: Bearer <key>".' : 'The API key is not valid.',
      details: null,
    };
    // Answered here: the request goes no further (done is not called).
    reply.code(401).header('www-authenticate', 'Bearer').send(body);
  });
}
