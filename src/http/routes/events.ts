import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpServices } from '../services.js';
import { CountResponse } from '../../core/schemas/common.js';
import { AgentEvent } from '../../core/schemas/event.js';
import { EventFilters, EventListQuery, EventPage, EventParams } from '../contract/events.js';
import { ConversationParams, errors } from '../route-schemas.js';
import { requires } from '../route-scopes.js';

export function eventRoutes(services: Pick<HttpServices, 'events'>): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/conversations/:id/events',
      {
        schema: {
          tags: ['events'],
          operationId: 'events.list',
          security: requires('conversations:read'),
          summary: 'List events (paginated; filters kind, source, after_seq, since; order asc|desc)',
          params: ConversationParams,
          querystring: EventListQuery,
          response: { 200: EventPage, ...errors(400, 404) },
        },
      },
      async (request, reply) => {
        const q = request.query;
        const page = await services.events.list(request.params.id, {
          kinds: q.kind,
          sources: q.source,
          afterSeq: q.after_seq,
          since: q.since,
          order: q.order,
          pageId: q.page_id,
          limit: q.limit,
        });
        // The stored lines are already the events' JSON: send them as they are, without re-serializing.
        const body = `{"items":[${page.items.map((item) => item.json).join(',')}],"next_page_id":${JSON.stringify(page.next_page_id)}}`;
        return reply.type('application/json; charset=utf-8').send(body as never);
      },
    );

    app.get(
      '/conversations/:id/events/count',
      {
        schema: {
          tags: ['events'],
          operationId: 'events.count',
          security: requires('conversations:read'),
          summary: 'Count events (same filters as the list)',
          params: ConversationParams,
          querystring: EventFilters,
          response: { 200: CountResponse, ...errors(400, 404) },
        },
      },
      async (request) => {
        const q = request.query;
        return { count: await services.events.count(request.params.id, { kinds: q.kind, sources: q.source, afterSeq: q.after_seq, since: q.since }) };
      },
    );

    app.get(
      '/conversations/:id/events/:event_id',
      {
        schema: {
          tags: ['events'],
          operationId: 'events.get',
          security: requires('conversations:read'),
          summary: 'Get one event',
          params: EventParams,
          response: { 200: AgentEvent, ...errors(400, 404) },
        },
      },
      async (request, reply) => reply.type('application/json; charset=utf-8').send((await services.events.get(request.params.id, request.params.event_id)).json as never),
    );
  };
}
