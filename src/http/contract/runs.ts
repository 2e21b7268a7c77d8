import { z } from 'zod';
import { Run } from '../../core/agent/run-record.js';
import { PageQuery, pageOf } from '../../core/schemas/common.js';
import { SortOrder } from '../../core/schemas/conversation.js';
import { MessageEvent } from '../../core/schemas/event.js';
import { ConversationParams } from '../route-schemas.js';

/** The bodies and answers of the message and run-control routes. */
export const MessageAccepted = z
  .object({
    event: MessageEvent,
    run_id: z.uuid().nullable().describe('The run that will see the message (started or already running); null with `run: false`.'),
  })
  .meta({ id: 'MessageAccepted' });
export const AnswerBody = z
  .object({
    tool_call_id: z.string().min(1).max(200).optional().describe('The `ask_user` call answered (the `question` event\'s `tool_call_id`); default: the open question.'),
    content: z.string().min(1).max(1_000_000).describe('The answer: the `ask_user` call\'s result, as the model reads it.'),
  })
  .strict()
  .meta({ id: 'Answer' });
export const AnswerAccepted = z
  .object({
    tool_call_id: z.string().describe('The question answered.'),
    run_id: z.uuid().describe('The run that waited for it and now goes on.'),
  })
  .meta({ id: 'AnswerAccepted' });
export const RunStarted = z.object({ run_id: z.uuid() }).meta({ id: 'RunStarted' });
export const RunPage = pageOf(Run, 'RunPage');
export const RunParams = ConversationParams.extend({ run_id: z.uuid() });
export const RunListQuery = PageQuery.extend({ order: SortOrder.default('asc') });
export const ConfirmationBody = z.object({ enabled: z.boolean() }).strict();
export const RejectBody = z.object({ reason: z.string().max(10_000).optional() }).strict();
