import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyContextConfig, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ErrorBody } from './errors.js';
import { MASTER_PRINCIPAL, type Principal } from '../../core/access/principal.js';
import type { KeyRefusal } from '../../core/access/key-service.js';
import type { Scope } from '../../core/access/scopes.js';
import { declaredScopes } from '../route-scopes.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route answers without a key (/alive, /health, /openapi.json). */
    public?: boolean;
    /** The route also accepts `?access_token=` (SSE streams: EventSource cannot send headers). */
    queryToken?: boolean;
  }
  interface FastifyRequest {
    /** Who sent it, once authenticated (absent on public routes and refused requests). */
    principal?: Principal;
    /** For the audit log: the key presented when it was refused, why a read is recorded, the resource made. */
    audit?: { keyId?: string | null; note?: string; resource?: string };
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

/** A request over its key's rate: the 429 to answer. */
export interface QuotaRefusal {
  status: 429;
  body: ErrorBody;
  retryAfterS: number;
}

export interface AuthOptions {
  keys: readonly string[];
  isPublicPath?: (path: string) => boolean;
  /** A presented secret that is not a master key: an API key or a token (`keys`, `jwt` modes); absent: master keys only. */
  resolve?: (secret: string) => Promise<{ principal: Principal } | { refused: KeyRefusal; keyId: string | null }>;
  /** After authentication: the key's requests per minute (null: nothing to count; a promise of null: within its limit). */
  meter?: (principal: Principal) => Promise<QuotaRefusal | null> | null;
  /** A request let in with the secret a rotation replaced (still in its grace period). */
  onRotated?: (request: FastifyRequest) => void;
}

/**
 * Lets a request go on (`done()`) for a public route or path, or a valid credential holding the
 * route's scope (within its rate); otherwise answers it 401, 403 or 429 here and never calls
 * `done`. `config` is its route's (`request.routeOptions.config`), which the caller has already read.
 */
export type Authorize = (request: FastifyRequest, reply: FastifyReply, config: FastifyContextConfig | undefined, done: () => void) => void;

const REFUSALS: Record<KeyRefusal, string> = {
  unknown: 'The API key is not valid.',
  expired: 'The API key has expired.',
  rotated: 'The API key was rotated and its grace period is over: use the new secret.',
};

/** What a route asks of a caller: one of these scopes (none listed: any valid key), or, when it declares none, to be an admin. */
type RouteNeeds = readonly Scope[] | 'admin';

export function createAuthorizer(options: AuthOptions): Authorize {
  const check = createKeyChecker(options.keys);
  // Each route's needs, read from its schema at its first request rather than at every one: a
  // route's `config` is its own object, the same at each of its requests.
  const needsByRoute = new WeakMap<FastifyContextConfig, RouteNeeds>();
  const needsOf = (request: FastifyRequest, config: FastifyContextConfig | undefined): RouteNeeds => {
    let needs = config && needsByRoute.get(config);
    if (needs === undefined) {
      needs = declaredScopes(request.routeOptions.schema) ?? 'admin';
      if (config) needsByRoute.set(config, needs);
    }
    return needs;
  };
  const refuse = (request: FastifyRequest, reply: FastifyReply, key: string | undefined, refusal: KeyRefusal, keyId: string | null) => {
    request.audit = { keyId, note: `refused:${refusal === 'unknown' ? 'unauthorized' : `key_${refusal}`}` };
    const body: ErrorBody = { error: 'unauthorized', message: key === undefined ? 'Send the API key as "Authorization: Bearer <key>".' : REFUSALS[refusal], details: refusal === 'unknown' ? null : { reason: refusal } };
    void reply.code(401).header('www-authenticate', 'Bearer').send(body);
  };
  const admit = (request: FastifyRequest, reply: FastifyReply, principal: Principal, needs: RouteNeeds, done: () => void) => {
    request.principal = principal;
    if (principal.rotated) options.onRotated?.(request);
    // A route that declares nothing is the admin's alone (a route added without its scope fails closed).
    const missing = needs === 'admin' ? (principal.admin ? null : 'keys:admin') : needs.length === 0 || needs.some((scope) => principal.scopes.has(scope)) ? null : needs[0]!;
    if (missing !== null) {
      request.audit = { ...request.audit, note: 'refused:insufficient_scope' };
      const body: ErrorBody = { error: 'insufficient_scope', message: `This key lacks the scope ${missing}.`, details: { scope: missing } };
      void reply.code(403).header('www-authenticate', `Bearer error="insufficient_scope", scope="${missing}"`).send(body);
      return;
    }
    const metered = options.meter?.(principal);
    if (!metered) return done();
    metered.then(
      (over) => {
        if (!over) return done();
        request.audit = { ...request.audit, note: 'refused:quota_exceeded' };
        void reply.code(429).header('retry-after', String(over.retryAfterS)).send(over.body);
      },
      (error: unknown) => void reply.send(error as Error),
    );
  };
  return (request, reply, config, done) => {
    if (config?.public) return done();
    const query = request.url.indexOf('?');
    const path = query === -1 ? request.url : request.url.slice(0, query);
    if (options.isPublicPath?.(path)) return done();
    const key = presentedKey(request, config?.queryToken === true);
    if (key === undefined) return refuse(request, reply, key, 'unknown', null);
    if (check(key)) return admit(request, reply, MASTER_PRINCIPAL, needsOf(request, config), done);
    if (!options.resolve) return refuse(request, reply, key, 'unknown', null);
    options.resolve(key).then(
      (result) => ('principal' in result ? admit(request, reply, result.principal, needsOf(request, config), done) : refuse(request, reply, key, result.refused, result.keyId)),
      (error: unknown) => void reply.send(error as Error),
    );
  };
}

/** Authentication as a hook of its own (app.ts: when CORS's hook must run between the request's first hook and this one). */
export function registerAuth(app: FastifyInstance, authorize: Authorize): void {
  // A callback hook, not an async one: every request passes here, and a promise per request is not free.
  app.addHook('onRequest', (request, reply, done) => {
    authorize(request, reply, request.routeOptions.config, done);
  });
}
