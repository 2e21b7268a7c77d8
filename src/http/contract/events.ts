import { z } from 'zod';
import { PageQuery, Timestamp, pageOf } from '../../core/schemas/common.js';
import { SortOrder } from '../../core/schemas/conversation.js';
import { AgentEvent, EVENT_KINDS } from '../../core/schemas/event.js';
import { ConversationParams } from '../route-schemas.js';

/** The query strings and pages of the event routes and streams. */
/** `?kind=a&kind=b` and `?kind=a,b` both work. */
function repeatable<const Values extends readonly [string, ...string[]]>(values: Values) {
  return z
    .union([z.string(), z.array(z.string())])
    .transform((value) => (Array.isArray(value) ? value : [value]).flatMap((part) => part.split(',')).filter(Boolean))
    .pipe(z.array(z.enum(values)))
    .optional();
}

export const EventFilters = z.object({
  kind: repeatable(EVENT_KINDS).describe('Only these kinds (repeat the parameter or separate with commas).'),
  source: repeatable(['user', 'agent', 'environment', 'system']).describe('Only these sources.'),
  after_seq: z.coerce.number().int().min(0).optional().describe('Only events with a greater seq.'),
  since: Timestamp.optional().describe('Only events at or after this time.'),
});
export const EventListQuery = PageQuery.extend(EventFilters.shape).extend({ order: SortOrder.default('asc') });
export const EventPage = pageOf(AgentEvent, 'EventPage');
export const EventParams = ConversationParams.extend({ event_id: z.uuid() });

export const StreamQuery = z.object({
  after_seq: z.coerce.number().int().min(0).optional().describe('Start after this cursor (Last-Event-ID takes precedence).'),
  access_token: z.string().optional().describe('The API key, for EventSource clients that cannot send headers.'),
});
export const FirehoseQuery = StreamQuery.extend({
  owner: z.string().min(1).max(200).optional().describe("An admin key's filter: only this owner's conversations (other keys see only their own owner's)."),
});
