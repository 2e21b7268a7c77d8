import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpServices } from '../services.js';
import { PageQuery } from '../../core/schemas/common.js';
import { Callback, CreateCallbackBody } from '../../core/webhooks/callback-schemas.js';
import { CallbackDeliveryPage, CallbackPage, CallbackParams } from '../contract/callbacks.js';
import { ConversationParams, errors } from '../route-schemas.js';
import { requires } from '../route-scopes.js';

export function callbackRoutes(services: Pick<HttpServices, 'callbacks'>): FastifyPluginAsyncZod {
  const callbacks = services.callbacks;
  const tags = ['callbacks'];
  return async (app) => {
    app.post(
      '/conversations/:id/callbacks',
      {
        schema: {
          tags,
          operationId: 'callbacks.create',
          security: requires('webhooks:write'),
          summary: 'Subscribe a URL to the conversation\'s events (signed when a secret is given)',
          params: ConversationParams,
          body: CreateCallbackBody,
          response: { 201: Callback, ...errors(400, 404, 409, 413, 415, 422) },
        },
      },
      async (request, reply) => reply.code(201).send(await callbacks.create(request.params.id, request.body)),
    );

    app.get(
      '/conversations/:id/callbacks',
      {
        schema: {
          tags,
          operationId: 'callbacks.list',
          security: requires('conversations:read'),
          summary: 'List the conversation\'s callbacks, server-wide ones included (secrets are never shown)',
          params: ConversationParams,
          querystring: PageQuery,
          response: { 200: CallbackPage, ...errors(400, 404) },
        },
      },
      async (request) => callbacks.list(request.params.id, { pageId: request.query.page_id, limit: request.query.limit }),
    );

    app.delete(
      '/conversations/:id/callbacks/:callback_id',
      {
        schema: {
          tags,
          operationId: 'callbacks.delete',
          security: requires('webhooks:write'),
          summary: 'Remove a callback; its deliveries stop at once (409 for a server-wide one)',
          params: CallbackParams,
          response: { 204: z.null().describe('Removed'), ...errors(400, 404, 409) },
        },
      },
      async (request, reply) => {
        await callbacks.delete(request.params.id, request.params.callback_id);
        return reply.code(204).send(null);
      },
    );

    app.get(
      '/conversations/:id/callbacks/:callback_id/deliveries',
      {
        schema: {
          tags,
          operationId: 'callbacks.deliveries',
          security: requires('conversations:read'),
          summary: 'Delivery log in seq order: delivered, then the event in progress, then those waiting',
          params: CallbackParams,
          querystring: PageQuery,
          response: { 200: CallbackDeliveryPage, ...errors(400, 404) },
        },
      },
      async (request) => callbacks.deliveries(request.params.id, request.params.callback_id, { pageId: request.query.page_id, limit: request.query.limit }),
    );

    app.post(
      '/conversations/:id/callbacks/:callback_id/enable',
      {
        schema: {
          tags,
          operationId: 'callbacks.enable',
          security: requires('webhooks:write'),
          summary: 'Resume a `failing` callback from the event where it stopped, with a fresh retry window',
          params: CallbackParams,
          response: { 200: Callback, ...errors(400, 404) },
        },
      },
      async (request) => callbacks.enable(request.params.id, request.params.callback_id),
    );
  };
}
