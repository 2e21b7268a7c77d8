import { z } from 'zod';
import { fillCommandTemplate } from '../catalog/command-template.js';
import { loadDescription } from './load-description.js';
import { defineTool } from './tool.js';

export const SLASH_COMMAND_TOOL_NAME = 'slash_command';

export const slashCommandTool = defineTool({
  name: SLASH_COMMAND_TOOL_NAME,
  description: loadDescription(import.meta.url, 'slash-command.md'),
  parameters: z.object({
    name: z.string().min(1).describe('The command, without the leading `/`.'),
    arguments: z.string().optional().describe('The text after the command name (`$ARGUMENTS`; its words are `$1`, `$2`…).'),
  }),
  argumentAliases: { command: 'name', args: 'arguments' },
  async execute(input, context) {
    const commands = context.catalog?.commands ?? [];
    const name = input.name.replace(/^\//, '');
    const command = commands.find((candidate) => candidate.name === name);
    if (!command) {
      const known = commands.map((candidate) => `/${candidate.name}`);
      return { isError: true, content: `There is no slash command named "/${name}". ${known.length > 0 ? `Commands: ${known.join(', ')}.` : 'This project has no slash commands.'}`, data: { error: 'unknown_command' } };
    }
    return { isError: false, content: fillCommandTemplate(command.template, input.arguments ?? ''), data: { command: command.name, path: command.path } };
  },
});
