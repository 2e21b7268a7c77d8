import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpServices } from '../services.js';
import { CommandResult, RunCommandBody } from '../../core/commands/command-runner.js';
import { ConversationParams, errors } from '../route-schemas.js';
import { requires } from '../route-scopes.js';

export function commandRoutes(services: Pick<HttpServices, 'commands'>): FastifyPluginAsyncZod {
  return async (app) => {
    app.post(
      '/conversations/:id/commands',
      {
        schema: {
          tags: ['commands'],
          operationId: 'commands.run',
          security: requires('commands:run'),
          summary: "Run a command in the workdir with the conversation's secrets (not the agent's shell); secret values are masked in the output",
          params: ConversationParams,
          body: RunCommandBody,
          response: { 200: CommandResult, ...errors(400, 403, 404, 413, 415) },
        },
      },
      async (request) => services.commands.run(request.params.id, request.body),
    );
  };
}
