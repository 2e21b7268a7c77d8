import type { FastifyReply } from 'fastify';
import type { z } from 'zod';
import { compileFromJsonSchema } from './response-serializer.js';

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * Sends objects that a service hands out unchanged until their data changes (frozen snapshots,
 * such as ConversationViews' conversations) with their body encoded once per object: the bytes
 * the route's response serializer would write for the same schema, kept as a Buffer beside the
 * object for as long as it lives. A conversation read is the same body until it changes, and its
 * serialisation (with several times that in temporary strings) was the largest part of such a request
 * after the socket's own work. Objects that are not frozen are serialized at every send.
 */
export function snapshotSender<T extends object>(schema: z.ZodType<T>): (reply: FastifyReply, value: T) => FastifyReply {
  const bodies = new WeakMap<T, Buffer>();
  // Compiled on first use, as the routes' serializers are (start-up compiles none).
  let serialize: ((value: unknown) => string) | null = null;
  return (reply, value) => {
    let body = bodies.get(value);
    if (body === undefined) {
      serialize ??= compileFromJsonSchema(schema) ?? unserializable();
      body = Buffer.from(serialize(value), 'utf8');
      if (Object.isFrozen(value)) bodies.set(value, body);
    }
    return reply.header('content-type', JSON_TYPE).send(body);
  };
}

function unserializable(): never {
  throw new Error('snapshotSender: the schema has no JSON Schema serializer');
}
