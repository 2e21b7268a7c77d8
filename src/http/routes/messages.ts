import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpServices } from '../services.js';
import { PostMessageBody } from '../../core/schemas/conversation.js';
import { MessageAccepted } from '../contract/runs.js';
import { ConversationParams, errors } from '../route-schemas.js';
import { requires } from '../route-scopes.js';

export function messageRoutes(services: Pick<HttpServices, 'conversations'>): FastifyPluginAsyncZod {
  return async (app) => {
    app.post(
      '/conversations/:id/messages',
      {
        schema: {
          tags: ['messages'],
          operationId: 'messages.send',
          security: requires('runs:write'),
          summary: 'Append a user message; starts a run unless `run: false` (queued into a run in progress)',
          params: ConversationParams,
          body: PostMessageBody,
          response: { 202: MessageAccepted, ...errors(400, 403, 404, 409, 413, 415, 422) },
        },
      },
      async (request, reply) => {
        const result = await services.conversations.postMessage(request.params.id, request.body);
        return reply.code(202).send(result as z.infer<typeof MessageAccepted>);
      },
    );
  };
}
