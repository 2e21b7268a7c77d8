import { ConversationStatus } from '../../core/schemas/event.js';
import type { ConversationStore } from '../../core/conversations/conversation-store.js';
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { ServerStatus } from '../../core/health/server-status.js';
import { generateAsyncApi } from '../asyncapi-document.js';
import { errors } from '../route-schemas.js';
import { Alive, Health, Info } from '../contract/health.js';
import { requires } from '../route-scopes.js';

export function healthRoutes(services: { status: ServerStatus; version: string; store?: Pick<ConversationStore, 'count'> }): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/alive',
      { config: { public: true }, schema: { tags: ['health'], operationId: 'health.alive', summary: 'Liveness: 200 as long as the process serves HTTP', security: [], response: { 200: Alive } } },
      async () => ({ status: 'ok' as const }),
    );

    app.get(
      '/health',
      {
        config: { public: true },
        schema: {
          tags: ['health'],
          operationId: 'health.ready',
          summary: 'Readiness: state loaded and data dir writable (not out of space); damaged data is reported, not fatal',
          security: [],
          response: { 200: Health, 503: Health },
        },
      },
      async (_request, reply) => {
        const { ready, report } = await services.status.readiness();
        return reply.code(ready ? 200 : 503).send(report);
      },
    );

    app.get(
      '/info',
      { schema: { tags: ['health'], operationId: 'health.info', security: requires('conversations:read'), summary: 'Version, uptime, conversation counts, tools and limits', response: { 200: Info, ...errors() } } },
      async (request) => {
        const info = await services.status.info();
        // A key that is not an admin's counts its owner's conversations only.
        const principal = request.principal;
        if (!principal || principal.admin || !services.store) return info;
        const store = services.store;
        const byStatus = Object.fromEntries(ConversationStatus.options.map((status) => [status, store.count(status, principal.owner)])) as typeof info.conversations.by_status;
        return { ...info, conversations: { total: store.count(undefined, principal.owner), by_status: byStatus } };
      },
    );

    app.get(
      '/openapi.json',
      {
        config: { public: true },
        schema: { tags: ['health'], operationId: 'health.openapi', summary: 'This OpenAPI 3.1 document', security: [], response: { 200: z.record(z.string(), z.unknown()) } },
      },
      async () => app.swagger() as unknown as Record<string, unknown>,
    );

    let asyncApi: Record<string, unknown> | undefined;
    app.get(
      '/asyncapi.json',
      {
        config: { public: true },
        schema: {
          tags: ['health'],
          operationId: 'health.asyncapi',
          summary: 'The AsyncAPI 3.0 document of the SSE streams and webhook payloads (every event kind, ids, Last-Event-ID)',
          security: [],
          response: { 200: z.record(z.string(), z.unknown()) },
        },
      },
      async () => (asyncApi ??= generateAsyncApi({ version: services.version })),
    );
  };
}
