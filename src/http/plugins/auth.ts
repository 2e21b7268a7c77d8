import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyContextConfig, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
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

export interface AuthOptions {
  keys: readonly string[];
  isPublicPath?: (path: string) => boolean;
}

/**
 * Whether a request may go on: true for a public route or path, or a valid key; otherwise it is
 * answered 401 here (and false returned: the request goes no further). `config` is its route's
 * (`request.routeOptions.config`), which the caller has already read.
 */
export type Authorize = (request: FastifyRequest, reply: FastifyReply, config: FastifyContextConfig | undefined) => boolean;

export function createAuthorizer(options: AuthOptions): Authorize {
  const check = createKeyChecker(options.keys);
  return (request, reply, config) => {
    if (config?.public) return true;
    const query = request.url.indexOf('?');
    const path = query === -1 ? request.url : request.url.slice(0, query);
    if (options.isPublicPath?.(path)) return true;
    const key = presentedKey(request, config?.queryToken === true);
    if (key !== undefined && check(key)) return true;
    const body: ErrorBody = {
      error: 'unauthorized',
      message: key === undefined ? 'Send the API key as "Authorization: Bearer <key>".' : 'The API key is not valid.',
      details: null,
    };
    void reply.code(401).header('www-authenticate', 'Bearer').send(body);
    return false;
  };
}

/** Authentication as a hook of its own (app.ts: when CORS's hook must run between the request's first hook and this one). */
export function registerAuth(app: FastifyInstance, authorize: Authorize): void {
  // A callback hook, not an async one: every request passes here, and a promise per request is not free.
  app.addHook('onRequest', (request, reply, done) => {
    if (authorize(request, reply, request.routeOptions.config)) done();
  });
}
