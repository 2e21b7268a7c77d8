import { z } from 'zod';
import { loadDescription } from './load-description.js';
import { defineTool } from './tool.js';

export const TASK_TOOL_NAME = 'task';

export const taskParameters = z.object({
  description: z.string().min(1).max(200).describe('A short (3-5 word) label for the work, shown to the user.'),
  prompt: z.string().min(1).describe('Everything the subagent needs to know to do the work and what to report back.'),
  subagent_type: z.string().min(1).optional().describe('The agent to run, as listed under "Subagents" (default `general-purpose`).'),
});
export type TaskInput = z.infer<typeof taskParameters>;

export const taskTool = defineTool({
  name: TASK_TOOL_NAME,
  description: loadDescription(import.meta.url, 'task.md'),
  parameters: taskParameters,
  argumentAliases: { agent: 'subagent_type', subagentType: 'subagent_type', task: 'prompt' },
  concurrent: true,
  async execute(input, context) {
    if (!context.runSubagent || context.toolCallId === undefined) {
      return { isError: true, content: 'Subagents cannot be started here (the depth limit for subagents is reached).', data: { error: 'depth_limit' } };
    }
    return context.runSubagent({ ...input, toolCallId: context.toolCallId });
  },
});
