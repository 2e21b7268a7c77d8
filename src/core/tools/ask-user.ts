import { z } from 'zod';
import { loadDescription } from './load-description.js';
import { defineTool } from './tool.js';

export const ASK_USER_TOOL_NAME = 'ask_user';

export const askUserParameters = z.object({
  question: z.string().min(1).max(10_000).describe('The question, self-contained: the user may read it without the rest of the conversation.'),
  options: z.array(z.string().min(1).max(500)).max(20).optional().describe('Suggested answers, when the answer is one of a few choices.'),
});

/**
 * Asks the user and waits: the runtime records a `question` event, sets the conversation to
 * `waiting_for_input` and resolves when POST /answer or the next message arrives. A pause or a
 * cancel ends the wait: the call is closed as interrupted, like any tool.
 */
export const askUserTool = defineTool({
  name: ASK_USER_TOOL_NAME,
  description: loadDescription(import.meta.url, 'ask-user.md'),
  parameters: askUserParameters,
  async execute(input, context) {
    if (!context.askUser || !context.toolCallId) return { isError: true, content: 'ask_user is not available here: nobody can answer. Decide yourself and say what you assumed.', data: { error: 'no_user' } };
    try {
      const answer = await context.askUser({ toolCallId: context.toolCallId, question: input.question, options: input.options });
      return { isError: false, content: answer.content, data: { answered_via: answer.via } };
    } catch (error) {
      if (context.signal.aborted) return { isError: true, content: 'Interrupted: the run was stopped while waiting for the answer.', data: { interrupted: true } };
      throw error;
    }
  },
});
