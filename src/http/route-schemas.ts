import { z } from 'zod';
import { ErrorResponse } from '../core/schemas/common.js';

/** The error responses a route can give, by status, for its OpenAPI entry. */
export function errors(...statuses: number[]): Record<number, typeof ErrorResponse> {
  return Object.fromEntries([401, ...statuses].map((status) => [status, ErrorResponse]));
}

export const ConversationParams = z.object({ id: z.uuid().describe('Conversation id') });
