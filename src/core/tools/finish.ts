import { z } from 'zod';
import { loadDescription } from './load-description.js';
import { defineTool } from './tool.js';

/** The agent loop ends the run as `finished` when it executes a tool with this name. */
export const FINISH_TOOL_NAME = 'finish';

export const finishParameters = z.object({
  message: z.string().describe('Final message to the user: what was done, and anything left for them to do.'),
});

export const finishTool = defineTool({
  name: FINISH_TOOL_NAME,
  description: loadDescription(import.meta.url, 'finish.md'),
  parameters: finishParameters,
  async execute(input) {
    return { content: input.message, isError: false, data: { finished: true } };
  },
});
