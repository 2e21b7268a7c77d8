import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import fastifyCors from '@fastify/cors';
import { fastifySSE } from '@fastify/sse';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import type { Services } from './compose.js';
import { limitConnections } from './http/connection-limits.js';
import { registerAuth } from './http/plugins/auth.js';
import { registerForwarding } from './cluster/forwarding.js';
import { clientErrorHandler, frameworkErrorHandler, registerErrorHandling } from './http/plugins/errors.js';
import { registerJsonBodyParser } from './http/plugins/json-body.js';
import { registerOpenApi } from './http/plugins/openapi.js';
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
import { streamRoutes } from './http/routes/streams.js';

/** Builds the Fastify instance around the services. Never listens (cli.ts does). */
export async function buildApp(services: Services): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: services.logger as FastifyBaseLogger,
    bodyLimit: services.config.maxBodyBytes,
    forceCloseConnections: true,
    requestIdHeader: 'x-request-id',
    genReqId: () => crypto.randomUUID(),
    // One line per request, written when it ends (below), instead of Fastify's two.
    logController: new LogController({ disableRequestLogging: true }),
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 4096 },
    frameworkErrors: frameworkErrorHandler,
    clientErrorHandler,
  });
  limitConnections(app.server, services.config.connections);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandling(app);
  if (services.config.corsOrigins.length > 0) {
    // Browser dashboards on other origins: bearer keys, no cookies, so credentials stay off.
    const origins = services.config.corsOrigins;
    await app.register(fastifyCors, {
      origin: origins.includes('*') ? '*' : origins.map((origin) => new URL(origin).origin),
      methods: ['GET', 'POST', 'PUT', 'DELETE'],
      allowedHeaders: ['authorization', 'content-type', 'last-event-id', 'x-request-id'],
      exposedHeaders: ['x-request-id', 'content-disposition', 'content-range'],
      maxAge: 600,
    });
  }
  registerJsonBodyParser(app);
  registerAuth(app, { keys: services.masterKeys, isPublicPath: (path) => path === '/docs' || path.startsWith('/docs/') });
  // Several instances: a conversation's requests go to the instance that runs it (after authentication).
  if (services.ownership) registerForwarding(app, services.ownership);
  await registerOpenApi(app, services);
  await app.register(fastifySSE, { heartbeatInterval: services.config.sseHeartbeatMs });

  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id);
    // Nothing is acknowledged before it is durable: on PostgreSQL, the writes this request made are committed first.
    await services.storage.durable();
  });
  app.addHook('preHandler', async (request, reply) => {
    // Every log line of a request about a conversation carries its id.
    const conversationId = (request.params as { id?: unknown } | undefined)?.id;
    if (typeof conversationId === 'string') request.log = reply.log = request.log.child({ conversation_id: conversationId });
  });
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    services.metrics.observeRequest({ method: request.method, route, status: reply.statusCode, seconds: reply.elapsedTime / 1000 });
    request.log.info({ req: request, res: reply, route, ms: Math.round(reply.elapsedTime * 100) / 100 }, 'request completed');
  });
  app.addHook('preClose', async () => {
    services.streams.closeAll('server_shutting_down');
  });

  await app.register(metricsRoutes(services));
  await app.register(healthRoutes(services));
  // Each route file gets only the services it uses.
  const { config, conversations, store, agent, secrets, commands, events, streams, callbacks, files } = services;
  await app.register(conversationRoutes({ conversations }));
  await app.register(messageRoutes({ conversations }));
  await app.register(runRoutes({ agent, conversations }));
  await app.register(mcpRoutes(services));
  await app.register(skillsRoutes(services));
  await app.register(secretRoutes({ secrets }));
  await app.register(commandRoutes({ commands }));
  await app.register(eventRoutes({ events }));
  await app.register(streamRoutes({ store, streams }));
  await app.register(callbackRoutes({ callbacks }));
  await app.register(fileRoutes({ config, files }));
  await app.register(checkpointRoutes(services));
  await app.register(dashboardRoutes());
  return app;
}
