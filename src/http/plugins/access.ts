import { isoTimestamp } from '../../core/clock.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AccessServices } from '../../core/access/access-services.js';
import type { KeyCheck } from '../../core/access/key-service.js';
import { mayAccess, type Principal } from '../../core/access/principal.js';
import { QuotaMeter, type QuotaExceeded } from '../../core/access/quota-meter.js';
import { AppError, NotFoundError } from '../../core/errors.js';
import type { ErrorBody } from './errors.js';

/** Routes that start (or continue) a run: the owner's concurrent runs and spend are checked first. */
const RUN_ROUTES = new Set(['POST /conversations/:id/run', 'POST /conversations/:id/messages', 'POST /conversations/:id/approve', 'POST /conversations/:id/answer']);
const CONVERSATION_ROUTE = '/conversations/:id';

/** A secret presented that is not a master key: an API key, else (jwt mode) a token. */
export function principalResolver(access: AccessServices): ((secret: string) => Promise<{ principal: Principal } | Extract<KeyCheck, { refused: unknown }>>) | undefined {
  if (access.mode === 'master') return undefined;
  return async (secret) => {
    const checked = await access.keys.authenticate(secret);
    if ('principal' in checked || checked.refused !== 'unknown' || !access.verifyToken) return checked;
    const principal = await access.verifyToken(secret);
    return principal ? { principal } : checked;
  };
}

export function quotaAnswer(over: QuotaExceeded, now: number): { status: 429; body: ErrorBody; retryAfterS: number } {
  const retryAfterS = over.resetsAt === null ? 1 : Math.max(1, Math.ceil((over.resetsAt - now) / 1000));
  return {
    status: 429,
    retryAfterS,
    body: { error: 'quota_exceeded', message: `Over the ${over.limit} limit (${over.max}; used ${over.limit === 'max_cost_usd' ? over.used.toFixed(6) : over.used}).`, details: QuotaMeter.details(over) },
  };
}

/** The principal of an authenticated request (routes behind a key always have one). */
export function principalOf(request: FastifyRequest): Principal {
  const principal = request.principal;
  if (!principal) throw new AppError({ code: 'unauthorized', kind: 'forbidden', message: 'No credential for this request.' });
  return principal;
}

/** The owner a list is filtered by: the caller's own, or for an admin the one asked for (all when none). */
export function ownerFilter(request: FastifyRequest, asked: string | undefined): string | undefined {
  const principal = principalOf(request);
  return principal.admin ? asked : principal.owner;
}

/** The routes whose body is checked against the key's models or the owner's limits. */
const WRITE_CHECKED = new Set(['POST /conversations', 'PUT /conversations/:id/config', ...RUN_ROUTES]);

/**
 * After validation, before the handler: another owner's conversation (and all under it) is a 404;
 * a new conversation or run is checked against the owner's limits; a model outside the key's list is refused.
 * Only routes with one of these checks to make get the hook: each hook costs every request of its route.
 */
export function registerAccessChecks(app: FastifyInstance, access: AccessServices): void {
  onEachKeyedRoute(app, (route, methods) => {
    const ownsConversation = route.startsWith(CONVERSATION_ROUTE);
    const checksWrites = methods.some((method) => WRITE_CHECKED.has(`${method} ${route}`));
    if (!ownsConversation && !checksWrites) return null;
    return (request, reply, done) => {
      const principal = request.principal;
      if (!principal) return done();
      if (ownsConversation && !principal.admin) {
        const id = (request.params as { id?: string }).id;
        if (id !== undefined) {
          const owner = access.ownerOf(id);
          if (owner !== undefined && !mayAccess(principal, owner)) {
            request.audit = { ...request.audit, note: 'refused:not_owner', resource: id };
            return done(new NotFoundError('conversation', id));
          }
        }
      }
      if (!checksWrites) return done();
      const key = `${request.method} ${route}`;
      const body = (request.body ?? {}) as { initial_message?: unknown; run?: unknown; llm?: { model?: unknown } };
      if (principal.allowedModels && (key === 'POST /conversations' || key === 'PUT /conversations/:id/config') && typeof body.llm?.model === 'string' && !principal.allowedModels.includes(body.llm.model)) {
        request.audit = { ...request.audit, note: 'refused:model_not_allowed' };
        return done(new AppError({ code: 'model_not_allowed', kind: 'forbidden', message: `This key may not use the model ${body.llm.model}.`, details: { model: body.llm.model, allowed_models: [...principal.allowedModels] } }));
      }
      const startsRun = key === 'POST /conversations' ? body.initial_message !== undefined && body.run !== false : RUN_ROUTES.has(key) && !(key === 'POST /conversations/:id/messages' && body.run === false);
      const over = key === 'POST /conversations' ? access.quotas.newConversation(principal) : null;
      if (over) return refuseOverQuota(request, reply, quotaAnswer(over, access.now()));
      if (!startsRun) return done();
      access.quotas.newRun(principal).then(
        (overRun) => (overRun ? refuseOverQuota(request, reply, quotaAnswer(overRun, access.now())) : done()),
        (error: unknown) => done(error as Error),
      );
    };
  });
}

type RouteHook = (request: FastifyRequest, reply: FastifyReply, done: (error?: Error) => void) => void;

/**
 * A preHandler hook on each route behind a key that needs one (`make` returns null for a route
 * that does not), made for its path and methods, first among the route's hooks: public routes
 * (/alive, /health) answer without a key, so they are spared its call on every request.
 */
function onEachKeyedRoute(app: FastifyInstance, make: (route: string, methods: readonly string[]) => RouteHook | null): void {
  app.addHook('onRoute', (route) => {
    if (route.config?.public) return;
    const hook = make(route.url ?? '', typeof route.method === 'string' ? [route.method] : route.method);
    if (hook === null) return;
    const own = route.preHandler as RouteHook | RouteHook[] | undefined;
    route.preHandler = own === undefined ? [hook] : [hook, ...(Array.isArray(own) ? own : [own])];
  });
}

function refuseOverQuota(request: FastifyRequest, reply: FastifyReply, answer: ReturnType<typeof quotaAnswer>): void {
  request.audit = { ...request.audit, note: 'refused:quota_exceeded' };
  void reply.code(429).header('retry-after', String(answer.retryAfterS)).send(answer.body);
}

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route is behind a key: its writes and refusals go to the audit log (marked as it is registered). */
    audited?: boolean;
  }
}

/**
 * Every write and every refusal goes to the audit log, after the answer. `register` marks the
 * routes behind a key as they are registered; `ended` is called as each response ends (app.ts,
 * with the request's metrics), on the listener every request has already: a Fastify onResponse
 * hook would make every request of those routes put listeners of its own on its response.
 */
export function auditTrail(access: AccessServices): { register(app: FastifyInstance): void; ended(reply: FastifyReply): void } {
  return {
    register(app) {
      app.addHook('onRoute', (route) => {
        if (!route.config?.public) route.config = { ...route.config, audited: true };
      });
    },
    ended(reply) {
      const request = reply.request;
      const note = request.audit?.note ?? null;
      const status = reply.statusCode;
      if (READS.has(request.method) && note === null && status !== 401 && status !== 403 && status !== 429) return;
      if (request.routeOptions.config?.audited) audit(access, request, status, note);
    },
  };
}

/** A request let in with a rotated key's old secret: recorded as it is let in (status null), whatever it then does. */
export function auditRotatedUse(access: AccessServices): (request: FastifyRequest) => void {
  return (request) => audit(access, request, null, 'rotated_key');
}

function audit(access: AccessServices, request: FastifyRequest, status: number | null, note: string | null): void {
  const params = (request.params ?? {}) as { id?: string };
  const principal = request.principal;
  access.audit
    .append({
      at: isoTimestamp(access.now()),
      key_id: principal?.keyId ?? request.audit?.keyId ?? null,
      owner: principal?.owner ?? null,
      method: request.method,
      route: request.routeOptions.url ?? request.url,
      resource: request.audit?.resource ?? params.id ?? null,
      status,
      client: request.ip,
      note,
    })
    .catch((error: unknown) => request.log.error({ err: error }, 'audit entry not written'));
}
