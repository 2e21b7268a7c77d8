import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import type { FastifyReply } from 'fastify';
import type { HttpServices } from '../services.js';
import { InvalidRequestError } from '../../core/errors.js';
import type { EventStream } from '../../core/events/event-stream.js';
import { FirehoseQuery, StreamQuery } from '../contract/events.js';
import { ConversationParams, errors } from '../route-schemas.js';
import { SseHeartbeats } from '../sse-heartbeats.js';
import { SseWriter } from '../sse-writer.js';
import { ownerFilter } from '../plugins/access.js';
import { requires } from '../route-scopes.js';

const SSE_DESCRIPTION =
  'Server-Sent Events: `id: <cursor>`, `event: <kind>`, `data: <event JSON>`. History after the cursor first, then live events. ' +
  'Reconnect with `Last-Event-ID` (or `?after_seq=`) to resume without gaps or duplicates. Heartbeat comments keep the connection open. ' +
  'Streaming-only `message_delta` events carry no id. A subscriber too slow to keep up gets `event: stream_overflow` and is disconnected; it resumes with Last-Event-ID.';

const SseResponse = {
  200: { description: SSE_DESCRIPTION, content: { 'text/event-stream': { schema: z.string() } } },
};

function startCursor(lastEventId: string | null | undefined, afterSeq: number | undefined): number {
  if (lastEventId !== undefined && lastEventId !== null && lastEventId !== '') {
    if (!/^\d{1,15}$/.test(lastEventId.trim())) throw new InvalidRequestError('invalid_last_event_id', 'Last-Event-ID must be a cursor (a whole number) this stream sent.');
    return Number(lastEventId.trim());
  }
  return afterSeq ?? 0;
}

/** How long an ended stream's last bytes (e.g. the overflow notice) may wait on a client that stopped reading. */
const FLUSH_GRACE_MS = 2000;

async function pipeStream(options: { reply: FastifyReply; stream: EventStream; heartbeats: SseHeartbeats; release: () => void }): Promise<void> {
  const { reply, stream, heartbeats, release } = options;
  reply.sse.onClose(release);
  // A subscriber that overflowed because it stopped reading would otherwise hold the connection forever.
  // Destroying with an error also settles @fastify/sse's pending write, which waits only for 'drain' or 'error'.
  stream.onEnd(() => {
    setTimeout(() => {
      if (!reply.raw.writableFinished && !reply.raw.destroyed) reply.raw.destroy(new Error('SSE subscriber did not read its stream'));
    }, FLUSH_GRACE_MS).unref();
  });
  reply.sse.sendHeaders();
  const response = reply.raw;
  response.write('retry: 2000\n\n');
  const writer = new SseWriter(response, heartbeats);
  heartbeats.add(writer);
  try {
    // Each batch in one write of frames encoded once for all subscribers (sse-writer.ts).
    for await (const batch of stream.batches()) {
      if (writer.closed) break;
      if (!writer.write(batch)) await writer.drained();
    }
  } catch {
    // The client went away mid-write: nothing to answer.
  } finally {
    heartbeats.delete(writer);
    release();
    if (!response.destroyed && !response.writableEnded) response.end();
  }
}

const rawSerializer = (data: unknown) => (typeof data === 'string' ? data : JSON.stringify(data));

export function streamRoutes(services: Pick<HttpServices, 'store' | 'streams' | 'access'> & { heartbeatMs: number }): FastifyPluginAsyncZod {
  return async (app) => {
    // One timer for the heartbeats of every stream of this server.
    const heartbeats = new SseHeartbeats(services.heartbeatMs);
    app.get(
      '/conversations/:id/events/stream',
      {
        sse: { kind: 'manual', heartbeat: false, serializer: rawSerializer },
        config: { queryToken: true },
        schema: {
          tags: ['events'],
          operationId: 'events.stream',
          security: requires('conversations:read'),
          summary: 'Stream a conversation\'s events (SSE)',
          params: ConversationParams,
          querystring: StreamQuery,
          response: { ...SseResponse, ...errors(400, 404) },
        },
      },
      async (request, reply) => {
        services.store.record(request.params.id);
        const afterCursor = startCursor(request.headers['last-event-id'] as string | undefined, request.query.after_seq);
        const stream = services.streams.openStream({ conversationId: request.params.id, afterCursor });
        await pipeStream({ reply, stream, heartbeats, release: () => services.streams.release(stream) });
      },
    );

    app.get(
      '/events/stream',
      {
        sse: { kind: 'manual', heartbeat: false, serializer: rawSerializer },
        config: { queryToken: true },
        schema: {
          tags: ['events'],
          operationId: 'events.firehose',
          security: requires('conversations:read'),
          summary: 'Stream every conversation\'s events (SSE firehose; `id:` is a global cursor)',
          querystring: FirehoseQuery,
          response: { ...SseResponse, ...errors(400) },
        },
      },
      async (request, reply) => {
        const afterCursor = startCursor(request.headers['last-event-id'] as string | undefined, request.query.after_seq);
        // A key that is not an admin's sees its owner's conversations only; an admin all, or the owner it asks for.
        const owner = ownerFilter(request, request.query.owner);
        const visible = owner === undefined ? undefined : (conversationId: string) => services.access.ownerOf(conversationId) === owner;
        const stream = services.streams.openStream({ conversationId: null, afterCursor, visible });
        await pipeStream({ reply, stream, heartbeats, release: () => services.streams.release(stream) });
      },
    );
  };
}
