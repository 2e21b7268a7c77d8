import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import fastifyCors from '@fastify/cors';
import { fastifySSE } from '@fastify/sse';
import { validatorCompiler } from 'fastify-type-provider-zod';
import type { Services } from './compose.js';
import { limitConnections } from './http/connection-limits.js';
import { createAuthorizer, registerAuth } from './http/plugins/auth.js';
import { auditRotatedUse, auditTrail, principalResolver, quotaAnswer, registerAccessChecks } from './http/plugins/access.js';
import { clientErrorHandler, frameworkErrorHandler, registerErrorHandling } from './http/plugins/errors.js';
import { registerJsonBodyParser } from './http/plugins/json-body.js';
import { registerOpenApi } from './http/plugins/openapi.js';
import { requestCompletion } from './http/request-completion.js';
import { RequestLogger } from './http/request-logger.js';
import { requestLineWriter } from './perf/request-log-line.js';
import { requestIdGenerator } from './http/request-ids.js';
import { responseSerializerCompiler } from './http/response-serializer.js';
import { callbackRoutes } from './http/routes/callbacks.js';
import { commandRoutes } from './http/routes/commands.js';
import { dashboardRoutes } from './http/routes/dashboard.js';
import { mcpRoutes } from './http/routes/mcp.js';
import { skillsRoutes } from './http/routes/skills.js';
import { conversationRoutes } from './http/routes/conversations.js';
import { eventRoutes } from './http/routes/events.js';
import { fileRoutes } from './http/routes/files.js';
import { checkpointRoutes } from './http/routes/checkpoints.js';
import { healthRoutes } from './http/routes/health.js';
import { messageRoutes } from './http/routes/messages.js';
import { metricsRoutes } from './http/routes/metrics.js';
import { runRoutes } from './http/routes/runs.js';
import { secretRoutes } from './http/routes/secrets.js';
import { scheduleRoutes } from './http/routes/schedules.js';
import { streamRoutes } from './http/routes/streams.js';
import { keyRoutes } from './http/routes/keys.js';

/** The conversation a request is about: the `id` of `/conversations/:id...`, the only routes with one. */
function conversationOf(request: FastifyRequest, route: string): string | undefined {
  if (!route.startsWith(CONVERSATION_ROUTE)) return undefined;
  const id = (request.params as { id?: unknown } | undefined)?.id;
  return typeof id === 'string' ? id : undefined;
}
const CONVERSATION_ROUTE = '/conversations/:id';

/** Builds the Fastify instance around the services. Never listens (cli.ts does). */
export async function buildApp(services: Services): Promise<FastifyInstance> {
  // The fields operators need, flat, in one line written through the root logger (no child per
  // request), the request metrics, and the audit trail of writes and refusals.
  const { logger, metrics, access } = services;
  const writeRequestLine = requestLineWriter(logger);
  const audit = auditTrail(access);
  const track = requestCompletion((reply, route, ms) => {
    audit.ended(reply);
    const request = reply.request;
    metrics.observeRequest(request.method, route, reply.statusCode, ms / 1000);
    if (logger.isLevelEnabled('info')) writeRequestLine({ reqId: request.id, conversationId: conversationOf(request, route), method: request.method, url: request.url, route, status: reply.statusCode, ms: Math.round(ms * 100) / 100, ip: request.ip });
  });
  const app = Fastify({
    // No logger of Fastify's own: requests log through their RequestLogger (set below) and the
    // request line (request-completion.ts says what a logger given to Fastify costs per request).
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: services.config.maxBodyBytes,
    forceCloseConnections: true,
    requestIdHeader: 'x-request-id',
    genReqId: requestIdGenerator(),
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 4096 },
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler,
    // zod checks requests and our serializer writes responses. Given here rather than set after,
    // they keep Fastify from loading its own (ajv's, fast-json-stringify's) as the instance is made:
    // its types name only those, hence the casts.
    schemaController: { compilersFactory: { buildValidator: (() => validatorCompiler) as never, buildSerializer: (() => responseSerializerCompiler) as never } },
  });
  limitConnections(app.server, services.config.connections);
  const resolve = principalResolver(access);
  const authorize = createAuthorizer({
    keys: services.masterKeys,
    isPublicPath: (path) => path === '/docs' || path.startsWith('/docs/'),
    ...(resolve && { resolve }),
    meter: (principal) => access.quotas.request(principal)?.then((over) => (over ? quotaAnswer(over, access.now()) : null)) ?? null,
    onRotated: auditRotatedUse(access),
  });
  // Browser dashboards on other origins: CORS's own hook must answer preflights, and put its
  // headers on every answer (401s included), after the request's first hook and before
  // authentication, which then has a hook of its own. Otherwise the first hook authenticates too.
  const corsOrigins = services.config.corsOrigins;
  const authorizeFirst = corsOrigins.length === 0;
  // First thing for every request: its id on the answer, also on those given in an onRequest
  // hook (401, CORS preflights), rather than in an onSend hook, a second pass per response; its
  // logger, whose lines carry the id and the conversation's id from the URL (for Fastify's own
  // lines about it too); its completion; and its key; and the server has work (the event loop's
  // delay is measured meanwhile). Fastify builds `routeOptions` anew at each read: read once.
  app.addHook('onRequest', (request, reply, done) => {
    metrics.requestArrived();
    const route = request.routeOptions;
    reply.header('x-request-id', request.id);
    request.log = reply.log = new RequestLogger(logger, { reqId: request.id }, request.url);
    track(reply, route.url ?? 'unmatched');
    if (authorizeFirst) authorize(request, reply, route.config, done);
    else done();
  });
  registerErrorHandling(app, (error) => services.storage.unavailable(error));
  if (!authorizeFirst) {
    // Bearer keys, no cookies, so credentials stay off.
    await app.register(fastifyCors, {
      origin: corsOrigins.includes('*') ? '*' : corsOrigins.map((origin) => new URL(origin).origin),
      methods: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
      allowedHeaders: ['authorization', 'content-type', 'last-event-id', 'x-request-id'],
      exposedHeaders: ['x-request-id', 'content-disposition', 'content-range'],
      maxAge: 600,
    });
    registerAuth(app, authorize);
  }
  registerJsonBodyParser(app);
  // Who owns what, the owner's limits, and the audit trail of writes and refusals.
  registerAccessChecks(app, access);
  audit.register(app);
  // Several instances: a conversation's requests go to the instance that runs it (after authentication).
  if (services.ownership) (await import('./adapters/cluster/index.js')).registerForwarding(app, services.ownership);
  await registerOpenApi(app, services);
  // Heartbeats are the stream routes' own (one timer for all streams, sse-heartbeats.ts), not the plugin's.
  await app.register(fastifySSE);

  // Nothing is acknowledged before it is durable: on PostgreSQL, the writes this request made are
  // committed first. Files are written synchronously: whatever a request wrote is already durable.
  if (services.storage.postgres) {
    app.addHook('onSend', async () => {
      await services.storage.durable();
    });
  }
  app.addHook('preClose', async () => {
    services.streams.closeAll('server_shutting_down');
  });

  await app.register(metricsRoutes(services));
  await app.register(healthRoutes(services));
  // Each route file gets only the services it uses.
  const { config, conversations, store, agent, secrets, commands, events, streams, callbacks, files } = services;
  await app.register(keyRoutes({ access }));
  await app.register(conversationRoutes({ conversations }));
  await app.register(messageRoutes({ conversations }));
  await app.register(runRoutes({ agent, conversations }));
  await app.register(mcpRoutes(services));
  await app.register(skillsRoutes(services));
  await app.register(secretRoutes({ secrets }));
  await app.register(commandRoutes({ commands }));
  await app.register(eventRoutes({ events }));
  await app.register(streamRoutes({ store, streams, access, heartbeatMs: config.sseHeartbeatMs }));
  await app.register(callbackRoutes({ callbacks }));
  await app.register(fileRoutes({ config, files }));
  await app.register(checkpointRoutes(services));
  await app.register(scheduleRoutes(services));
  await app.register(dashboardRoutes());
  return app;
}
