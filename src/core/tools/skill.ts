import { z } from 'zod';
import { loadDescription } from './load-description.js';
import { defineTool } from './tool.js';

export const SKILL_TOOL_NAME = 'skill';

export const skillTool = defineTool({
  name: SKILL_TOOL_NAME,
  description: loadDescription(import.meta.url, 'skill.md'),
  parameters: z.object({ name: z.string().min(1).describe('The skill to load, as listed under "Skills".') }),
  argumentAliases: { skill: 'name', command: 'name' },
  async execute(input, context) {
    const skills = context.catalog?.skills ?? [];
    const skill = skills.find((candidate) => candidate.name === input.name);
    if (!skill) {
      const known = skills.map((candidate) => candidate.name);
      return { isError: true, content: `There is no skill named "${input.name}". ${known.length > 0 ? `Skills: ${known.join(', ')}.` : 'This project has no skills.'}`, data: { error: 'unknown_skill' } };
    }
    const content = [`Skill "${skill.name}" (${skill.directory}/SKILL.md). Files it mentions are in ${skill.directory}.`, '', skill.text].join('\n');
    return { isError: false, content, data: { skill: skill.name, source: skill.source, path: skill.path } };
  },
});
