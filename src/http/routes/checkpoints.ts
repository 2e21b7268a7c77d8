import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpServices } from '../services.js';
import { ChangesPage, ChangesQuery, CheckpointListQuery, CheckpointPage, ForkBody, RewindBody, RewindResult } from '../../core/checkpoints/checkpoint-schemas.js';
import { Conversation } from '../../core/schemas/conversation.js';
import { ConversationParams, errors, optionalBody } from '../route-schemas.js';
import { requires } from '../route-scopes.js';

/** Time travel: a conversation's workdir checkpoints, rewinding to one, the changes since one, and forks. */
export function checkpointRoutes(services: Pick<HttpServices, 'checkpoints' | 'forks' | 'agent'>): FastifyPluginAsyncZod {
  const { checkpoints, forks, agent } = services;
  const tags = ['checkpoints'];
  return async (app) => {
    app.get(
      '/conversations/:id/checkpoints',
      {
        schema: {
          tags,
          operationId: 'checkpoints.list',
          security: requires('files:read'),
          summary: 'List the workdir checkpoints (before each run and each file-changing tool call), oldest first',
          params: ConversationParams,
          querystring: CheckpointListQuery,
          response: { 200: CheckpointPage, ...errors(400, 404) },
        },
      },
      async (request) => checkpoints.list(request.params.id, { order: request.query.order, pageId: request.query.page_id, limit: request.query.limit }),
    );

    app.post(
      '/conversations/:id/rewind',
      {
        schema: {
          tags,
          operationId: 'checkpoints.rewind',
          security: requires('conversations:write'),
          summary: 'Restore the workdir and/or the LLM history to a checkpoint (a checkpoint taken first undoes it); 409 while a run is in progress',
          params: ConversationParams,
          body: RewindBody,
          response: { 200: RewindResult, ...errors(400, 404, 409, 413, 415, 422) },
        },
      },
      async (request) => {
        const result = await checkpoints.rewind(request.params.id, request.body);
        if (request.body.conversation) await agent.refreshHistory(request.params.id);
        return result;
      },
    );

    app.get(
      '/conversations/:id/changes',
      {
        schema: {
          tags,
          operationId: 'checkpoints.changes',
          security: requires('files:read'),
          summary: 'Files changed in the workdir since the conversation\'s first checkpoint (or `since_checkpoint`), with unified diffs',
          params: ConversationParams,
          querystring: ChangesQuery,
          response: { 200: ChangesPage, ...errors(400, 404, 422) },
        },
      },
      async (request) => checkpoints.changes(request.params.id, { sinceCheckpoint: request.query.since_checkpoint, pageId: request.query.page_id, limit: request.query.limit }),
    );

    app.post(
      '/conversations/:id/fork',
      {
        schema: {
          tags: ['conversations'],
          operationId: 'conversations.fork',
          security: requires('conversations:write'),
          summary: 'A new conversation with this one\'s events up to `at_seq` (same seqs, new ids), its config, and optionally its secrets and a copy of its workdir',
          params: ConversationParams,
          body: optionalBody(ForkBody),
          response: { 201: Conversation, ...errors(400, 404, 413, 415, 422) },
        },
      },
      async (request, reply) => reply.code(201).send(await forks.fork(request.params.id, request.body ?? ForkBody.parse({}))),
    );
  };
}
