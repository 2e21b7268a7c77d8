import { readAsset } from '../../assets.js';
import type { AgentDefinition, ProjectCatalog } from '../catalog/project-catalog.js';
import { catalogSection } from './catalog-prompt.js';
import type { ProjectContext } from './project-instructions.js';
import { buildSystemPrompt, environmentSection } from './system-prompt.js';

const SUBAGENT_SECTION = readAsset(import.meta.url, 'subagent-prompt.md').trim();

/**
 * A subagent's system prompt: agentd's own (the built-in general-purpose agent) or the
 * definition's, then what being a subagent means, the catalog lists its tools use, the environment.
 */
export function subagentSystemPrompt(inputs: { agent: AgentDefinition; tools: readonly string[]; workdir: string; secretNames: readonly string[]; now: Date; project: ProjectContext; catalog: ProjectCatalog }): string {
  if (inputs.agent.prompt.trim() === '') {
    return `${buildSystemPrompt({ ...inputs, catalog: inputs.catalog, subagent: true }).trimEnd()}\n\n${SUBAGENT_SECTION}\n`;
  }
  const parts = [inputs.agent.prompt.trim(), SUBAGENT_SECTION];
  const catalog = catalogSection(inputs.catalog, new Set(inputs.tools));
  if (catalog) parts.push(catalog);
  parts.push(environmentSection(inputs));
  return `${parts.join('\n\n')}\n`;
}
