import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpServices } from '../services.js';
import { CountResponse } from '../../core/schemas/common.js';
import { Conversation, CreateConversationBody, UpdateConversationConfigBody } from '../../core/schemas/conversation.js';
import { ConversationListQuery, ConversationPage, DeleteConversationQuery, StatusFilter } from '../contract/conversations.js';
import { ConversationParams, errors, optionalBody } from '../route-schemas.js';
import { snapshotSender } from '../snapshot-body.js';
import { ownerFilter, principalOf } from '../plugins/access.js';
import { requires } from '../route-scopes.js';

export function conversationRoutes(services: Pick<HttpServices, 'conversations'>): FastifyPluginAsyncZod {
  const conversations = services.conversations;
  const sendConversation = snapshotSender(Conversation);
  return async (app) => {
    app.post(
      '/conversations',
      {
        schema: {
          tags: ['conversations'],
          operationId: 'conversations.create',
          security: requires('conversations:write'),
          summary: 'Create a conversation (and optionally send its first message)',
          // Every field is optional, so the body is too: an empty body creates with the defaults.
          body: optionalBody(CreateConversationBody),
          response: { 201: Conversation, ...errors(400, 413, 415, 422) },
        },
      },
      async (request, reply) => {
        const { conversation } = await conversations.create(request.body ?? CreateConversationBody.parse({}), { owner: principalOf(request).owner });
        request.audit = { ...request.audit, resource: conversation.id };
        return reply.code(201).send(conversations.get(conversation.id));
      },
    );

    app.get(
      '/conversations',
      {
        schema: {
          tags: ['conversations'],
          operationId: 'conversations.list',
          security: requires('conversations:read'),
          summary: 'List conversations (paginated, filter by status, sort by created_at or updated_at)',
          querystring: ConversationListQuery,
          response: { 200: ConversationPage, ...errors(400) },
        },
      },
      async (request) => {
        const { status, owner, sort, order, page_id, limit } = request.query;
        return conversations.list({ status, owner: ownerFilter(request, owner), sort, order, pageId: page_id, limit });
      },
    );

    app.get(
      '/conversations/count',
      {
        schema: {
          tags: ['conversations'],
          operationId: 'conversations.count',
          security: requires('conversations:read'),
          summary: 'Count conversations (same filters as the list)',
          querystring: StatusFilter,
          response: { 200: CountResponse, ...errors(400) },
        },
      },
      async (request) => ({ count: conversations.count(request.query.status, ownerFilter(request, request.query.owner)) }),
    );

    app.get(
      '/conversations/:id',
      {
        schema: {
          tags: ['conversations'],
          operationId: 'conversations.get',
          security: requires('conversations:read'),
          summary: 'Get a conversation',
          params: ConversationParams,
          response: { 200: Conversation, ...errors(400, 404) },
        },
      },
      // Not async: resolving a handler's promise with the reply (a thenable) costs a lookup of its
      // `then` and a round through it on every request; this one has nothing to wait for.
      (request, reply) => {
        sendConversation(reply, conversations.get(request.params.id));
      },
    );

    app.put(
      '/conversations/:id/config',
      {
        schema: {
          tags: ['conversations'],
          operationId: 'conversations.updateConfig',
          security: requires('conversations:write'),
          summary: 'Change llm, workdir, max_iterations_per_run or title mid-conversation',
          params: ConversationParams,
          body: UpdateConversationConfigBody,
          response: { 200: Conversation, ...errors(400, 404, 413, 415, 422) },
        },
      },
      async (request) => conversations.updateConfig(request.params.id, request.body),
    );

    app.delete(
      '/conversations/:id',
      {
        schema: {
          tags: ['conversations'],
          operationId: 'conversations.delete',
          security: requires('conversations:write'),
          summary: 'Delete a conversation: stops any run, removes its state (and, if asked, a workdir the server created)',
          description:
            'Answers 204 once the run is stopped, the conversation\'s processes (its sandboxed shell, MCP servers) are killed and its state is removed. With `delete_workdir=true` it also waits until those processes have exited, then removes the workdir.',
          params: ConversationParams,
          querystring: DeleteConversationQuery,
          response: { 204: z.null().describe('Deleted'), ...errors(400, 404) },
        },
      },
      async (request, reply) => {
        await conversations.delete(request.params.id, { deleteWorkdir: request.query.delete_workdir });
        return reply.code(204).send(null);
      },
    );
  };
}
