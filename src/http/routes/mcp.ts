import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpServices } from '../services.js';
import { McpStatusList } from '../../core/schemas/mcp-servers.js';
import { ConversationParams, errors } from '../route-schemas.js';
import { requires } from '../route-scopes.js';

export function mcpRoutes(services: Pick<HttpServices, 'mcp' | 'store'>): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/conversations/:id/mcp',
      {
        schema: {
          tags: ['conversations'],
          operationId: 'mcp.status',
          security: requires('conversations:read'),
          summary: "The conversation's MCP servers: transport, status, tools, and why a failed one failed (asking starts servers not started yet)",
          params: ConversationParams,
          response: { 200: McpStatusList, ...errors(400, 404) },
        },
      },
      async (request) => ({ servers: await services.mcp.status(services.store.record(request.params.id)) }),
    );
  };
}
