import { z } from 'zod';
import { PageQuery, QueryBoolean, pageOf } from '../../core/schemas/common.js';
import { Conversation, ConversationSort, SortOrder } from '../../core/schemas/conversation.js';
import { ConversationStatus } from '../../core/schemas/event.js';

/** The query strings and pages of the conversation routes. */
export const ConversationPage = pageOf(Conversation, 'ConversationPage');
export const StatusFilter = z.object({
  status: ConversationStatus.optional(),
  owner: z.string().min(1).max(200).optional().describe("An admin key's filter: only this owner's conversations (other keys see only their own owner's)."),
});
export const ConversationListQuery = PageQuery.extend(StatusFilter.shape).extend({
  sort: ConversationSort.default('created_at'),
  order: SortOrder.default('desc'),
});
export const DeleteConversationQuery = z.object({ delete_workdir: QueryBoolean.default(false) });
