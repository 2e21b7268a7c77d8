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
  return (candidate) => {
    const probe = digest(candidate);
    let ok = false;
    for (const key of digests) ok = timingSafeEqual(probe, key) || ok;
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
  app.addHook('onRequest', async (request, reply) => {
    const config = request.routeOptions.config;
    if (config?.public) return;
    const path = request.url.split('?')[0]!;
    if (options.isPublicPath?.(path)) return;
    const key = presentedKey(request, config?.queryToken === true);
    if (key !== undefined && check(key)) return;
    const body: ErrorBody = {
      error: 'unauthorized',
      message: key === undefined ? 'Send the API key as "Authorization: Bearer <key>".' : 'The API key is not valid.',
      details: null,
    };
    return reply.code(401).header('www-authenticate', 'Bearer').send(body);
  });
}
