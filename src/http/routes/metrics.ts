import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpServices } from '../services.js';
import { errors } from '../route-schemas.js';
import { requires } from '../route-scopes.js';

/** GET /metrics: Prometheus text (HTTP requests are counted by a root hook in app.ts). */
export function metricsRoutes(services: Pick<HttpServices, 'config' | 'metrics'>): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/metrics',
      {
        config: { public: services.config.publicMetrics },
        schema: {
          tags: ['health'],
          operationId: 'health.metrics',
          security: requires('keys:admin'),
          summary: 'Prometheus metrics (public when AGENTD_PUBLIC_METRICS=true)',
          response: { 200: { description: 'Prometheus text exposition format', content: { 'text/plain': { schema: z.string() } } }, ...errors() },
        },
      },
      async (_request, reply) => {
        const text = await services.metrics.registry.metrics();
        return reply.type(services.metrics.registry.contentType).send(text);
      },
    );
  };
}
