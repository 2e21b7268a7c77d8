import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpServices } from '../services.js';
import { Run } from '../../core/agent/run-record.js';
import { CondenseAccepted, CondenseBody, Conversation } from '../../core/schemas/conversation.js';
import { AnswerAccepted, AnswerBody, ConfirmationBody, RejectBody, RunListQuery, RunPage, RunParams, RunStarted } from '../contract/runs.js';
import { ConversationParams, errors, optionalBody } from '../route-schemas.js';
import { requires } from '../route-scopes.js';

/** A conversation's runs: start, pause, confirmation (approve, reject), and the run records. */
export function runRoutes(services: Pick<HttpServices, 'agent' | 'conversations'>): FastifyPluginAsyncZod {
  const agent = services.agent;
  const tags = ['messages'];
  return async (app) => {
    app.post(
      '/conversations/:id/run',
      { schema: { tags, operationId: 'runs.start', security: requires('runs:write'), summary: 'Start (or continue) a run; 409 while one is running', params: ConversationParams, response: { 202: RunStarted, ...errors(400, 404, 409, 422) } } },
      async (request, reply) => reply.code(202).send({ run_id: await agent.startRun(request.params.id) }),
    );

    app.post(
      '/conversations/:id/pause',
      { schema: { tags, operationId: 'runs.pause', security: requires('runs:write'), summary: 'Stop the run at the next safe point, interrupting a running tool; status `paused`', params: ConversationParams, response: { 200: Conversation, ...errors(400, 404) } } },
      async (request) => {
        await agent.pause(request.params.id);
        return services.conversations.get(request.params.id);
      },
    );

    app.post(
      '/conversations/:id/confirmation',
      {
        schema: {
          tags,
          operationId: 'runs.setConfirmation',
          security: requires('runs:write'),
          summary: 'Turn confirmation mode on or off (actions wait for approve/reject)',
          params: ConversationParams,
          body: ConfirmationBody,
          response: { 200: Conversation, ...errors(400, 404, 413, 415) },
        },
      },
      async (request) => {
        agent.setConfirmationMode(request.params.id, request.body.enabled);
        return services.conversations.get(request.params.id);
      },
    );

    app.post(
      '/conversations/:id/approve',
      { schema: { tags, operationId: 'runs.approve', security: requires('runs:write'), summary: 'Run the pending actions and continue', params: ConversationParams, response: { 202: RunStarted, ...errors(400, 404, 409, 422) } } },
      async (request, reply) => reply.code(202).send({ run_id: await agent.approve(request.params.id) }),
    );

    app.post(
      '/conversations/:id/reject',
      {
        schema: {
          tags,
          operationId: 'runs.reject',
          security: requires('runs:write'),
          summary: 'Reject the pending actions (the LLM sees the rejection) and continue',
          params: ConversationParams,
          body: optionalBody(RejectBody),
          response: { 202: RunStarted, ...errors(400, 404, 409, 413, 415, 422) },
        },
      },
      async (request, reply) => reply.code(202).send({ run_id: await agent.reject(request.params.id, request.body?.reason) }),
    );

    app.post(
      '/conversations/:id/answer',
      {
        schema: {
          tags,
          operationId: 'runs.answer',
          security: requires('runs:write'),
          summary: 'Answer the open `ask_user` question: the answer becomes the call\'s result and the run goes on (a plain message also answers it)',
          params: ConversationParams,
          body: AnswerBody,
          response: { 202: AnswerAccepted, ...errors(400, 404, 409, 413, 415) },
        },
      },
      async (request, reply) => reply.code(202).send(agent.answer(request.params.id, request.body)),
    );

    app.post(
      '/conversations/:id/condense',
      {
        schema: {
          tags,
          operationId: 'conversations.condense',
          security: requires('runs:write'),
          summary: 'Condense the LLM history now: the middle is summarized by the LLM (a `condensation` event); during a run, before its next LLM request. 409 when there is nothing to condense',
          params: ConversationParams,
          body: optionalBody(CondenseBody),
          response: { 202: CondenseAccepted, ...errors(400, 404, 409, 413, 415, 422) },
        },
      },
      async (request, reply) => reply.code(202).send(await agent.condenseNow(request.params.id, request.body ?? {})),
    );

    app.get(
      '/conversations/:id/runs',
      {
        schema: {
          tags,
          operationId: 'runs.list',
          security: requires('conversations:read'),
          summary: 'List run records (paginated, oldest first unless order=desc)',
          params: ConversationParams,
          querystring: RunListQuery,
          response: { 200: RunPage, ...errors(400, 404) },
        },
      },
      async (request) => agent.runsPage(request.params.id, { order: request.query.order, pageId: request.query.page_id, limit: request.query.limit }),
    );

    app.get(
      '/conversations/:id/runs/:run_id',
      { schema: { tags, operationId: 'runs.get', security: requires('conversations:read'), summary: 'Get one run', params: RunParams, response: { 200: Run, ...errors(400, 404) } } },
      async (request) => agent.getRun(request.params.id, request.params.run_id),
    );

    app.delete(
      '/conversations/:id/runs/:run_id',
      { schema: { tags, operationId: 'runs.cancel', security: requires('runs:write'), summary: 'Cancel a run in progress (recorded as `canceled`)', params: RunParams, response: { 200: Run, ...errors(400, 404, 409) } } },
      async (request) => agent.cancelRun(request.params.id, request.params.run_id),
    );
  };
}
