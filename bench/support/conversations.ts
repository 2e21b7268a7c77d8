import type { Services } from '../../src/compose.js';
import { CreateConversationBody } from '../../src/core/schemas/conversation.js';

/** Creates a conversation in-process from a body as a client would send it (defaults applied by its schema). */
export async function createConversation(services: Services, body: Record<string, unknown> = {}): Promise<string> {
  return (await services.conversations.create(CreateConversationBody.parse(body))).record.id;
}
