import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpServices } from '../services.js';
import { pageOf, PageQuery } from '../../core/schemas/common.js';
import { CreateConversationScheduleBody, CreateScheduleBody, ListSchedulesQuery, PauseScheduleBody, Preview, PreviewQuery, Schedule, ScheduleFire, UpdateScheduleBody } from '../../core/schedules/schedule-schemas.js';
import type { ScheduleCaller } from '../../core/schedules/schedule-service.js';
import { ConversationParams, errors, optionalBody } from '../route-schemas.js';
import { ownerFilter, principalOf } from '../plugins/access.js';
import { requires } from '../route-scopes.js';
import type { FastifyRequest } from 'fastify';

const ScheduleParams = z.object({ id: z.uuid().describe('Schedule id') });
/** The calling key's owner: new schedules get it, and a key that is not an admin's sees only its own. */
function callerOf(request: FastifyRequest): ScheduleCaller {
  return {
    owner: principalOf(request).owner,
    only: ownerFilter(request, undefined),
    refused: (resource) => {
      request.audit = { ...request.audit, note: 'refused:not_owner', resource };
    },
  };
}

const SchedulePage = pageOf(Schedule, 'SchedulePage');
const ScheduleFirePage = pageOf(ScheduleFire, 'ScheduleFirePage');

export function scheduleRoutes(services: Pick<HttpServices, 'schedules'>): FastifyPluginAsyncZod {
  const schedules = services.schedules;
  const tags = ['schedules'];
  return async (app) => {
    app.post(
      '/schedules',
      {
        schema: {
          tags,
          operationId: 'schedules.create', security: requires('schedules:write'),
          summary: 'Create a schedule: a message sent on a cron pattern or an interval, to a conversation or to a new one each time',
          body: CreateScheduleBody,
          response: { 201: Schedule, ...errors(400, 404, 413, 415, 422) },
        },
      },
      async (request, reply) => reply.code(201).send(await schedules.create(request.body, callerOf(request))),
    );

    app.get(
      '/schedules',
      {
        schema: {
          tags,
          operationId: 'schedules.list', security: requires('conversations:read'),
          summary: 'List schedules (by id), optionally of one target conversation or in one status',
          querystring: ListSchedulesQuery,
          response: { 200: SchedulePage, ...errors(400) },
        },
      },
      async (request) => schedules.list(request.query, { ...callerOf(request), only: ownerFilter(request, request.query.owner) }),
    );

    app.get(
      '/schedules/preview',
      {
        schema: {
          tags,
          operationId: 'schedules.preview', security: requires('conversations:read'),
          summary: 'The next fire times of a cron pattern or an interval (for a form), with the DST policy `gap` and `repeat`',
          querystring: PreviewQuery,
          response: { 200: Preview, ...errors(400, 422) },
        },
      },
      async (request) => schedules.preview(request.query),
    );

    app.post(
      '/conversations/:id/schedules',
      {
        schema: {
          tags,
          operationId: 'schedules.createForConversation', security: requires('schedules:write'),
          summary: 'Create a schedule whose target is this conversation',
          params: ConversationParams,
          body: CreateConversationScheduleBody,
          response: { 201: Schedule, ...errors(400, 404, 413, 415, 422) },
        },
      },
      async (request, reply) => reply.code(201).send(await schedules.create({ ...request.body, conversation_id: request.params.id }, callerOf(request))),
    );

    app.get(
      '/schedules/:id',
      { schema: { tags, operationId: 'schedules.get', security: requires('conversations:read'), summary: 'One schedule, with its status and next fire', params: ScheduleParams, response: { 200: Schedule, ...errors(400, 404) } } },
      async (request) => schedules.get(request.params.id, callerOf(request)),
    );

    app.patch(
      '/schedules/:id',
      {
        schema: {
          tags,
          operationId: 'schedules.update', security: requires('schedules:write'),
          summary: 'Change a schedule (its target stays); the next fire is computed again',
          params: ScheduleParams,
          body: UpdateScheduleBody,
          response: { 200: Schedule, ...errors(400, 404, 413, 415, 422) },
        },
      },
      async (request) => schedules.update(request.params.id, request.body, callerOf(request)),
    );

    app.delete(
      '/schedules/:id',
      { schema: { tags, operationId: 'schedules.delete', security: requires('schedules:write'), summary: 'Delete a schedule and its fire records (runs it started go on)', params: ScheduleParams, response: { 204: z.null().describe('Deleted'), ...errors(400, 404) } } },
      async (request, reply) => {
        await schedules.delete(request.params.id, callerOf(request));
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/schedules/:id/trigger',
      {
        schema: {
          tags,
          operationId: 'schedules.trigger', security: requires('schedules:write'),
          summary: 'Fire now (by the overlap policy); the next slot still fires and `max_fires` is not used up',
          params: ScheduleParams,
          response: { 201: ScheduleFire, ...errors(400, 404, 422) },
        },
      },
      async (request, reply) => reply.code(201).send(await schedules.trigger(request.params.id, callerOf(request))),
    );

    app.post(
      '/schedules/:id/pause',
      {
        schema: {
          tags,
          operationId: 'schedules.pause', security: requires('schedules:write'),
          summary: 'Pause: slots that pass are recorded `skipped_paused` at the resume',
          params: ScheduleParams,
          body: optionalBody(PauseScheduleBody),
          response: { 200: Schedule, ...errors(400, 404, 415) },
        },
      },
      async (request) => schedules.pause(request.params.id, request.body?.note, callerOf(request)),
    );

    app.post(
      '/schedules/:id/resume',
      { schema: { tags, operationId: 'schedules.resume', security: requires('schedules:write'), summary: 'Resume from now (a `paused` schedule; missed slots do not fire)', params: ScheduleParams, response: { 200: Schedule, ...errors(400, 404) } } },
      async (request) => schedules.resume(request.params.id, callerOf(request)),
    );

    app.get(
      '/schedules/:id/fires',
      {
        schema: {
          tags,
          operationId: 'schedules.fires', security: requires('conversations:read'),
          summary: 'One record per slot, newest first: started, skipped (overlap, missed, paused) or failed, with why',
          params: ScheduleParams,
          querystring: PageQuery,
          response: { 200: ScheduleFirePage, ...errors(400, 404) },
        },
      },
      async (request) => schedules.fires(request.params.id, request.query, callerOf(request)),
    );
  };
}
