import { z } from 'zod';
import { ErrorResponse } from '../core/schemas/common.js';

/** The error responses a route can give, by status, for its OpenAPI entry (every keyed route may answer 401, 403 insufficient_scope and 429 quota_exceeded). */
export function errors(...statuses: number[]): Record<number, typeof ErrorResponse> {
  return Object.fromEntries([...new Set([401, 403, 429, ...statuses])].sort((a, b) => a - b).map((status) => [status, ErrorResponse]));
}

export const ConversationParams = z.object({ id: z.uuid().describe('Conversation id') });

/**
 * A request body that may be left out: no body, or an empty one with `Content-Type:
 * application/json`, validates as `undefined` (Fastify hands a missing body to validation as null).
 */
export function optionalBody<T extends z.ZodType>(schema: T) {
  return z.preprocess((value) => (value === null ? undefined : value), schema.optional());
}
