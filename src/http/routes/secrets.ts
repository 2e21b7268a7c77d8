import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpServices } from '../services.js';
import { PutSecrets, SecretNames } from '../contract/secrets.js';
import { ConversationParams, errors } from '../route-schemas.js';
import { requires } from '../route-scopes.js';

export function secretRoutes(services: Pick<HttpServices, 'secrets'>): FastifyPluginAsyncZod {
  const tags = ['secrets'];
  return async (app) => {
    app.put(
      '/conversations/:id/secrets',
      {
        schema: {
          tags,
          operationId: 'secrets.put',
          security: requires('secrets:write'),
          summary: 'Merge secrets in (values are encrypted at rest, exported to the shell and commands, masked everywhere)',
          params: ConversationParams,
          body: PutSecrets,
          response: { 200: SecretNames, ...errors(400, 404, 413, 415) },
        },
      },
      async (request) => ({ names: await services.secrets.put(request.params.id, request.body.secrets) }),
    );

    app.get(
      '/conversations/:id/secrets',
      { schema: { tags, operationId: 'secrets.list', security: requires('conversations:read'), summary: 'Secret names (never values)', params: ConversationParams, response: { 200: SecretNames, ...errors(400, 404) } } },
      async (request) => ({ names: services.secrets.names(request.params.id) }),
    );

    app.delete(
      '/conversations/:id/secrets/:name',
      {
        schema: {
          tags,
          operationId: 'secrets.delete',
          security: requires('secrets:write'),
          summary: 'Remove a secret',
          params: ConversationParams.extend({ name: z.string().min(1).max(128) }),
          response: { 204: z.null().describe('Removed'), ...errors(400, 404) },
        },
      },
      async (request, reply) => {
        await services.secrets.remove(request.params.id, request.params.name);
        return reply.code(204).send(null);
      },
    );
  };
}
