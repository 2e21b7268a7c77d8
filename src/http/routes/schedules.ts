import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { HttpServices } from '../services.js';
import { pageOf, PageQuery } from '../../core/schemas/common.js';
import { CreateConversationScheduleBody, CreateScheduleBody, ListSchedulesQuery, PauseScheduleBody, Preview, PreviewQuery, Schedule, ScheduleFire, UpdateScheduleBody } from '../../core/schedules/schedule-schemas.js';
import { ConversationParams, errors, optionalBody } from '../route-schemas.js';

const ScheduleParams = z.object({ id: z.uuid().describe('Schedule id') });
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
          operationId: 'schedules.create',
          summary: 'Create a schedule: a message sent on a cron pattern or an interval, to a conversation or to a new one each time',
          body: CreateScheduleBody,
          response: { 201: Schedule, ...errors(400, 404, 413, 415, 422) },
        },
      },
      async (request, reply) => reply.code(201).send(await schedules.create(request.body)),
    );

    app.get(
      '/schedules',
      {
        schema: {
          tags,
          operationId: 'schedules.list',
          summary: 'List schedules (by id), optionally of one target conversation or in one status',
          querystring: ListSchedulesQuery,
          response: { 200: SchedulePage, ...errors(400) },
        },
      },
      async (request) => schedules.list(request.query),
    );

    app.get(
      '/schedules/preview',
      {
        schema: {
          tags,
          operationId: 'schedules.preview',
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
          operationId: 'schedules.createForConversation',
          summary: 'Create a schedule whose target is this conversation',
          params: ConversationParams,
          body: CreateConversationScheduleBody,
          response: { 201: Schedule, ...errors(400, 404, 413, 415, 422) },
        },
      },
      async (request, reply) => reply.code(201).send(await schedules.create({ ...request.body, conversation_id: request.params.id })),
    );

    app.get(
      '/schedules/:id',
      { schema: { tags, operationId: 'schedules.get', summary: 'One schedule, with its status and next fire', params: ScheduleParams, response: { 200: Schedule, ...errors(400, 404) } } },
      async (request) => schedules.get(request.params.id),
    );

    app.patch(
      '/schedules/:id',
      {
        schema: {
          tags,
          operationId: 'schedules.update',
          summary: 'Change a schedule (its target stays); the next fire is computed again',
          params: ScheduleParams,
          body: UpdateScheduleBody,
          response: { 200: Schedule, ...errors(400, 404, 413, 415, 422) },
        },
      },
      async (request) => schedules.update(request.params.id, request.body),
    );

    app.delete(
      '/schedules/:id',
      { schema: { tags, operationId: 'schedules.delete', summary: 'Delete a schedule and its fire records (runs it started go on)', params: ScheduleParams, response: { 204: z.null().describe('Deleted'), ...errors(400, 404) } } },
      async (request, reply) => {
        await schedules.delete(request.params.id);
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/schedules/:id/trigger',
      {
        schema: {
          tags,
          operationId: 'schedules.trigger',
          summary: 'Fire now (by the overlap policy); the next slot still fires and `max_fires` is not used up',
          params: ScheduleParams,
          response: { 201: ScheduleFire, ...errors(400, 404, 422) },
        },
      },
      async (request, reply) => reply.code(201).send(await schedules.trigger(request.params.id)),
    );

    app.post(
      '/schedules/:id/pause',
      {
        schema: {
          tags,
          operationId: 'schedules.pause',
          summary: 'Pause: slots that pass are recorded `skipped_paused` at the resume',
          params: ScheduleParams,
          body: optionalBody(PauseScheduleBody),
          response: { 200: Schedule, ...errors(400, 404, 415) },
        },
      },
      async (request) => schedules.pause(request.params.id, request.body?.note),
    );

    app.post(
      '/schedules/:id/resume',
      { schema: { tags, operationId: 'schedules.resume', summary: 'Resume from now (a `paused` schedule; missed slots do not fire)', params: ScheduleParams, response: { 200: Schedule, ...errors(400, 404) } } },
      async (request) => schedules.resume(request.params.id),
    );

    app.get(
      '/schedules/:id/fires',
      {
        schema: {
          tags,
          operationId: 'schedules.fires',
          summary: 'One record per slot, newest first: started, skipped (overlap, missed, paused) or failed, with why',
          params: ScheduleParams,
          querystring: PageQuery,
          response: { 200: ScheduleFirePage, ...errors(400, 404) },
        },
      },
      async (request) => schedules.fires(request.params.id, request.query),
    );
  };
}
