import { AGENT_NAME_PATTERN, type AgentDefinitions, type CatalogAgent, type CatalogCommand, type CatalogError, type CatalogSkill, type SkillCatalog } from '../schemas/catalog.js';
import type { CatalogFiles } from './catalog-files.js';
import { listField, parseFrontmatter, textField, type Frontmatter } from './frontmatter.js';

export const GENERAL_PURPOSE_AGENT = 'general-purpose';
const MAX_FILE_BYTES = 256 * 1024;
/** Entries of one directory looked at, at most: a huge directory costs no more than this. */
const MAX_ENTRIES = 200;
/** Catalog files read at the same time. */
const READ_CONCURRENCY = 8;
const SKILL_DIRS = ['.claude/skills', '.agents/skills'];
const COMMAND_DIR = '.claude/commands';
const AGENT_DIR = '.claude/agents';

/** The workdir entries under which every project catalog file lies: a workdir with neither holds none. */
export const PROJECT_CATALOG_ROOTS = ['.claude', '.agents'] as const;

/**
 * Whether the workdir may hold project catalog files: false only for a workdir that exists
 * without a `.claude` or `.agents` entry, whose catalog is then not walked for them (directory by
 * directory, each pinned) at every run start. Asked anew each time: nothing is cached.
 */
export function mayHoldProjectCatalog(files: { present(dir: string, name: string): boolean }, workdir: string): boolean {
  return !files.present(workdir, '') || PROJECT_CATALOG_ROOTS.some((name) => files.present(workdir, name));
}

export type Skill = CatalogSkill & { text: string };
export type SlashCommand = CatalogCommand & { template: string };
export type AgentDefinition = CatalogAgent & { prompt: string };

/** What a conversation's agent can load on demand: skills, slash commands, subagent definitions. */
export interface ProjectCatalog {
  skills: Skill[];
  commands: SlashCommand[];
  agents: AgentDefinition[];
  errors: CatalogError[];
}

export const EMPTY_CATALOG: ProjectCatalog = { skills: [], commands: [], agents: [], errors: [] };

/**
 * Reads the catalog: the workdir's skills, commands and agents (null when `setting_sources`
 * excludes the project), the server's skills directory, and the conversation's `agents`.
 * A file that cannot be used is an `errors` entry, never a thrown error. Earlier sources win a
 * name: `.claude/skills`, `.agents/skills`, then the server's; config agents over agent files.
 */
export async function loadCatalog(options: { project: CatalogFiles | null; server: CatalogFiles | null; agents: AgentDefinitions | undefined }): Promise<ProjectCatalog> {
  // Each directory is read into a part of its own, all at once (each read walks pinned paths); the parts are then joined in precedence order.
  const part = async (read: (catalog: ProjectCatalog) => Promise<unknown>): Promise<ProjectCatalog> => {
    const catalog: ProjectCatalog = { skills: [], commands: [], agents: [], errors: [] };
    await read(catalog);
    return catalog;
  };
  const { project, server } = options;
  const parts = await Promise.all([
    ...SKILL_DIRS.map((dir) => part(async (catalog) => project && (await readSkills(catalog, project, dir, 'path')))),
    part(async (catalog) => server && (await readSkills(catalog, server, '.', 'server'))),
    part(async (catalog) => project && (await readCommands(catalog, project))),
    part(async (catalog) => {
      for (const [name, definition] of Object.entries(options.agents ?? {})) {
        catalog.agents.push({ name, description: definition.description, source: 'config', path: null, tools: definition.tools ?? null, model: definition.model ?? null, prompt: definition.prompt });
      }
    }),
    part(async (catalog) => project && (await readAgents(catalog, project))),
  ]);
  const catalog: ProjectCatalog = { skills: [], commands: [], agents: [], errors: [] };
  for (const next of parts) {
    catalog.errors.push(...next.errors);
    catalog.commands.push(...next.commands);
    for (const skill of next.skills) {
      const known = catalog.skills.find((other) => other.name === skill.name);
      if (known) catalog.errors.push({ type: 'skill', source: skill.source, path: skill.path, error: `a skill named ${JSON.stringify(skill.name)} is already defined in ${known.path}` });
      else catalog.skills.push(skill);
    }
    for (const agent of next.agents) {
      const known = catalog.agents.find((other) => other.name === agent.name);
      if (known) catalog.errors.push({ type: 'agent', source: agent.source, path: agent.path, error: `an agent named ${JSON.stringify(agent.name)} is already defined ${known.source === 'config' ? "in the conversation's `agents`" : `in ${known.path}`}` });
      else catalog.agents.push(agent);
    }
  }
  if (!catalog.agents.some((agent) => agent.name === GENERAL_PURPOSE_AGENT)) catalog.agents.push(generalPurpose());
  return catalog;
}

/** The catalog as GET /skills shows it: no file bodies. */
export function publicCatalog(catalog: ProjectCatalog): SkillCatalog {
  return {
    skills: catalog.skills.map(({ text: _text, ...skill }) => skill),
    commands: catalog.commands.map(({ template: _template, ...command }) => command),
    agents: catalog.agents.map(({ prompt: _prompt, ...agent }) => agent),
    errors: catalog.errors,
  };
}

async function readSkills(catalog: ProjectCatalog, files: CatalogFiles, dir: string, source: 'path' | 'server'): Promise<void> {
  const entries = (await listed(catalog, files, dir, 'skill', source)).filter((entry) => entry.type !== 'file' && !entry.name.startsWith('.'));
  const read = await readAll(files, entries.map((entry) => `${dir === '.' ? entry.name : `${dir}/${entry.name}`}/SKILL.md`));
  entries.forEach((entry, index) => {
    const { file, parsed, error } = read[index]!;
    const fail = (message: string) => void catalog.errors.push({ type: 'skill', source, path: file, error: message });
    if (!parsed) return fail(error);
    const skillDir = file.slice(0, -'/SKILL.md'.length);
    const name = textField(parsed.data, 'name') || entry.name;
    const description = textField(parsed.data, 'description');
    const known = catalog.skills.find((skill) => skill.name === name);
    if (!AGENT_NAME_PATTERN.test(name)) fail(`the skill name ${JSON.stringify(name)} is not 1-64 letters, digits, \`-\` or \`_\``);
    else if (!description) fail('the frontmatter has no `description` (the agent needs it to know when to use the skill)');
    else if (known) fail(`a skill named ${JSON.stringify(name)} is already defined in ${known.path}`);
    else catalog.skills.push({ name, description, source, path: file, directory: files.root === '/' ? `/${skillDir}` : `${files.root}/${skillDir}`, text: parsed.body.trim() });
  });
}

async function readCommands(catalog: ProjectCatalog, files: CatalogFiles): Promise<void> {
  const entries = (await listed(catalog, files, COMMAND_DIR, 'command', 'path')).filter((entry) => entry.type !== 'directory' && entry.name.endsWith('.md'));
  const read = await readAll(files, entries.map((entry) => `${COMMAND_DIR}/${entry.name}`));
  entries.forEach((entry, index) => {
    const { file, parsed, error } = read[index]!;
    const fail = (message: string) => void catalog.errors.push({ type: 'command', source: 'path', path: file, error: message });
    const name = entry.name.slice(0, -'.md'.length);
    if (!AGENT_NAME_PATTERN.test(name)) return fail(`the command name ${JSON.stringify(name)} (its file name) is not 1-64 letters, digits, \`-\` or \`_\``);
    if (!parsed) return fail(error);
    const description = textField(parsed.data, 'description') || firstLine(parsed.body);
    catalog.commands.push({ name, description: description ?? null, source: 'path', path: file, argument_hint: textField(parsed.data, 'argument-hint') ?? null, template: parsed.body.trim() });
  });
}

async function readAgents(catalog: ProjectCatalog, files: CatalogFiles): Promise<void> {
  const entries = (await listed(catalog, files, AGENT_DIR, 'agent', 'path')).filter((entry) => entry.type !== 'directory' && entry.name.endsWith('.md'));
  const read = await readAll(files, entries.map((entry) => `${AGENT_DIR}/${entry.name}`));
  entries.forEach((entry, index) => {
    const { file, parsed, error } = read[index]!;
    const fail = (message: string) => void catalog.errors.push({ type: 'agent', source: 'path', path: file, error: message });
    if (!parsed) return fail(error);
    const name = textField(parsed.data, 'name') || entry.name.slice(0, -'.md'.length);
    const description = textField(parsed.data, 'description');
    const prompt = parsed.body.trim();
    const known = catalog.agents.find((agent) => agent.name === name);
    if (!AGENT_NAME_PATTERN.test(name)) fail(`the agent name ${JSON.stringify(name)} is not 1-64 letters, digits, \`-\` or \`_\``);
    else if (!description) fail('the frontmatter has no `description` (the main agent needs it to choose this agent)');
    else if (prompt === '') fail("the file has no body: the body is the agent's system prompt");
    else if (known) fail(`an agent named ${JSON.stringify(name)} is already defined ${known.source === 'config' ? "in the conversation's `agents`" : `in ${known.path}`}`);
    else catalog.agents.push({ name, description, source: 'path', path: file, tools: listField(parsed.data, 'tools') ?? null, model: textField(parsed.data, 'model') ?? null, prompt });
  });
}

/** Files read and parsed a few at a time (each read walks a pinned path), results in the order given. */
async function readAll(files: CatalogFiles, paths: string[]): Promise<{ file: string; parsed: Frontmatter | null; error: string }[]> {
  const out: { file: string; parsed: Frontmatter | null; error: string }[] = new Array(paths.length);
  let next = 0;
  const worker = async () => {
    while (next < paths.length) {
      const index = next++;
      const file = paths[index]!;
      let error = '';
      const parsed = await readParsed(files, file, (message) => void (error = message));
      out[index] = { file, parsed, error };
    }
  };
  await Promise.all(Array.from({ length: Math.min(READ_CONCURRENCY, paths.length) }, worker));
  return out;
}

/** The entries of a catalog directory, sorted by name; a directory that cannot be listed (a symlink out of the workdir) is reported. */
async function listed(catalog: ProjectCatalog, files: CatalogFiles, dir: string, type: CatalogError['type'], source: CatalogError['source']): Promise<Awaited<ReturnType<CatalogFiles['list']>>> {
  try {
    const entries = await files.list(dir);
    return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).slice(0, MAX_ENTRIES);
  } catch (error) {
    catalog.errors.push({ type, source, path: dir, error: unreadable(error) });
    return [];
  }
}

/** The file's frontmatter and body, or null when it cannot be read or parsed (reported through `fail`). */
async function readParsed(files: CatalogFiles, file: string, fail: (error: string) => void): Promise<Frontmatter | null> {
  let text: string;
  try {
    text = await files.read(file, MAX_FILE_BYTES);
  } catch (error) {
    fail(unreadable(error));
    return null;
  }
  try {
    return await parseFrontmatter(text);
  } catch (error) {
    fail((error as Error).message);
    return null;
  }
}

function generalPurpose(): AgentDefinition {
  return {
    name: GENERAL_PURPOSE_AGENT,
    description: 'General-purpose agent for researching complex questions, searching for code and carrying out multi-step tasks on its own. Use it when a search or a piece of work would fill your context with details you do not need afterwards.',
    source: 'builtin',
    path: null,
    tools: null,
    model: null,
    prompt: '',
  };
}

function firstLine(body: string): string | undefined {
  const line = body.split('\n').map((text) => text.trim()).find((text) => text !== '');
  return line ? line.slice(0, 200) : undefined;
}

function unreadable(error: unknown): string {
  const code = (error as { code?: string }).code;
  const message = (error as Error).message ?? String(error);
  return code ? `unreadable (${code}): ${message}` : `unreadable: ${message}`;
}
