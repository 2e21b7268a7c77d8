import os from 'node:os';
import { readAsset } from '../../assets.js';
import type { ProjectCatalog } from '../catalog/project-catalog.js';
import { catalogSection } from './catalog-prompt.js';
import type { ProjectContext } from './project-instructions.js';

const TEMPLATE = readAsset(import.meta.url, 'system-prompt.md');
/** The rules part of the prompt by set of enabled tools (the template never changes while the server runs). */
const renderedRules = new Map<string, string>();

export interface SystemPromptInputs {
  workdir: string;
  /** Names of the tools the conversation enables: the prompt speaks only of these. */
  tools: readonly string[];
  /** Names (never values) of the conversation's secrets. */
  secretNames: readonly string[];
  now: Date;
  /** The repository and its AGENTS.md/CLAUDE.md (readProjectContext; none when `setting_sources` excludes the project). */
  project: ProjectContext;
  /** Skills, slash commands and subagents: listed (names and descriptions) for the tools that use them. */
  catalog?: ProjectCatalog;
  /** A subagent's prompt: nobody reads its replies as they come or answers its questions (no `user` block). */
  subagent?: boolean;
}

/**
 * The system prompt: the stable rules first (they depend only on the enabled tools, so providers
 * can cache them), then the repository's AGENTS.md/CLAUDE.md, then the environment (workdir, git,
 * secrets' names, date). The runtime rebuilds it at the start of every run and records a new
 * `system_prompt` event when the text differs.
 */
export function buildSystemPrompt(inputs: SystemPromptInputs): string {
  const enabled = new Set(inputs.tools);
  if (enabled.has('glob') || enabled.has('grep')) enabled.add('search');
  if (enabled.has('web_fetch') || enabled.has('web_search')) enabled.add('web');
  if (enabled.has('bash') && (enabled.has('glob') || enabled.has('grep') || enabled.has('file_editor'))) enabled.add('dedicated');
  if (!inputs.subagent) enabled.add('user');
  const key = [...enabled].sort().join(',');
  let rules = renderedRules.get(key);
  if (rules === undefined) {
    rules = renderTemplate(TEMPLATE, enabled).trim();
    renderedRules.set(key, rules);
  }
  const parts = [rules];
  if (inputs.project.instructions) parts.push(inputs.project.instructions);
  const catalog = inputs.catalog ? catalogSection(inputs.catalog, enabled) : null;
  if (catalog) parts.push(catalog);
  parts.push(environmentSection(inputs));
  return `${parts.join('\n\n')}\n`;
}

/**
 * Keeps `{{#name}}…{{/name}}` blocks whose name is enabled and `{{^name}}…{{/name}}` blocks whose
 * name is not, drops the others (blocks of different names nest).
 */
export function renderTemplate(template: string, enabled: ReadonlySet<string>): string {
  let text = template;
  for (;;) {
    const next = text.replace(/\{\{([#^])([a-z_]+)\}\}((?:(?!\{\{[#^])[\s\S])*?)\{\{\/\2\}\}/g, (_match, sign: string, name: string, body: string) => (enabled.has(name) === (sign === '#') ? body : ''));
    if (next === text) return text.replace(/\n{3,}/g, '\n\n');
    text = next;
  }
}

/** The environment section alone (a subagent's prompt ends with it). */
export function environmentSection(inputs: SystemPromptInputs): string {
  const { gitRoot } = inputs.project;
  const lines = ['# Environment', `- Workdir: ${inputs.workdir} (also $HOME; the shell starts here).`];
  if (gitRoot === null) lines.push('- The workdir is not inside a git repository.');
  else if (gitRoot === inputs.workdir) lines.push('- The workdir is a git repository.');
  else lines.push(`- The workdir is inside the git repository at ${gitRoot}.`);
  lines.push(`- Operating system: ${os.type()} ${os.release()} (${os.arch()}).`);
  if (inputs.secretNames.length > 0) {
    const names = [...inputs.secretNames].sort().map((name) => `$${name}`).join(', ');
    lines.push(`- Secrets set as environment variables (values hidden): ${names}.`);
    if (inputs.secretNames.includes('GITHUB_TOKEN')) lines.push('- GITHUB_TOKEN also authenticates git over HTTPS to github.com: plain `git clone/fetch/push https://github.com/...` works.');
  } else {
    lines.push('- No secrets are set for this conversation.');
  }
  lines.push(`- Today's date: ${inputs.now.toISOString().slice(0, 10)}.`);
  return lines.join('\n');
}
