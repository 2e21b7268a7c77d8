import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpServices } from '../services.js';
import { publicCatalog } from '../../core/catalog/project-catalog.js';
import { SkillCatalog } from '../../core/schemas/catalog.js';
import { ConversationParams, errors } from '../route-schemas.js';
import { requires } from '../route-scopes.js';

export function skillsRoutes(services: Pick<HttpServices, 'agent' | 'store'>): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/conversations/:id/skills',
      {
        schema: {
          tags: ['conversations'],
          operationId: 'skills.list',
          security: requires('conversations:read'),
          summary: "The skills, slash commands and subagent definitions the conversation's agent can use, with where each comes from; malformed files are listed under `errors` (the run goes on without them)",
          params: ConversationParams,
          response: { 200: SkillCatalog, ...errors(400, 404) },
        },
      },
      async (request) => publicCatalog(await services.agent.catalogOf(services.store.record(request.params.id))),
    );
  };
}
