import type { ProjectCatalog } from '../catalog/project-catalog.js';

/**
 * The system prompt's lists of what the agent can load on demand: names and descriptions only
 * (progressive disclosure), each list only when the tool that uses it is offered.
 */
export function catalogSection(catalog: ProjectCatalog, tools: ReadonlySet<string>): string | null {
  const parts: string[] = [];
  if (tools.has('skill') && catalog.skills.length > 0) {
    parts.push(
      [
        '# Skills',
        'Skills are instructions for particular tasks, loaded when needed. When a task matches a description below, call `skill` with its name first and follow what it says.',
        ...catalog.skills.map((skill) => `- ${skill.name}: ${oneLine(skill.description)}`),
      ].join('\n'),
    );
  }
  if (tools.has('slash_command') && catalog.commands.length > 0) {
    parts.push(
      [
        '# Slash commands',
        'When the user writes `/name …` for one of these, call `slash_command` with the name and the rest of their words as `arguments`, then carry out the prompt it returns.',
        ...catalog.commands.map((command) => `- /${command.name}${command.argument_hint ? ` ${oneLine(command.argument_hint)}` : ''}${command.description ? `: ${oneLine(command.description)}` : ''}`),
      ].join('\n'),
    );
  }
  if (tools.has('task') && catalog.agents.length > 0) {
    parts.push(
      ['# Subagents', 'The agent types `task` can run (`subagent_type`):', ...catalog.agents.map((agent) => `- ${agent.name}: ${oneLine(agent.description)}`)].join('\n'),
    );
  }
  return parts.length > 0 ? parts.join('\n\n') : null;
}

function oneLine(text: string | null): string {
  const flat = (text ?? '').replace(/\s+/g, ' ').trim();
  return flat.length > 300 ? `${flat.slice(0, 297)}...` : flat;
}
