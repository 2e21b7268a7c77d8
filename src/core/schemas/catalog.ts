import { z } from 'zod';

/** The most JSON a conversation's `agents` may hold: it is saved with every change of the record. */
const MAX_AGENTS_BYTES = 256 * 1024;

export const AGENT_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

export const AgentDefinitionInput = z
  .object({
    description: z.string().min(1).max(4096).describe('When to use this agent: the main agent reads it to choose one.'),
    prompt: z.string().min(1).max(100_000).describe("The subagent's system prompt."),
    tools: z.array(z.string().min(1).max(128)).max(100).optional().describe("Tool names it may use (never more than the main agent's); default: all of them but `task`."),
    model: z.string().min(1).max(200).optional().describe("The model it runs on (`inherit`, the default, is the conversation's)."),
  })
  .strict()
  .meta({ id: 'AgentDefinition' });
export type AgentDefinitionInput = z.infer<typeof AgentDefinitionInput>;

export const AgentDefinitions = z
  .record(z.string().regex(AGENT_NAME_PATTERN, 'an agent name is 1-64 letters, digits, `-` or `_`'), AgentDefinitionInput)
  .refine((agents) => Object.keys(agents).length <= 50, 'at most 50 agents')
  .refine((agents) => Buffer.byteLength(JSON.stringify(agents)) <= MAX_AGENTS_BYTES, `agents may hold at most ${MAX_AGENTS_BYTES / 1024} KiB of JSON`)
  .describe('Subagent definitions the `task` tool can run, by name (beside `.claude/agents/*.md` and the built-in `general-purpose`).')
  .meta({ id: 'AgentDefinitions' });
export type AgentDefinitions = z.infer<typeof AgentDefinitions>;

const CatalogSource = z
  .enum(['path', 'server', 'config', 'builtin'])
  .describe("`path`: a file in the workdir; `server`: the server's skills directory (AGENTD_SKILLS_DIR); `config`: the conversation's `agents`; `builtin`: agentd's own.");

const Base = {
  name: z.string(),
  description: z.string().nullable(),
  source: CatalogSource,
  path: z.string().nullable().describe('The file, relative to the workdir (or to the skills directory for `server`); null for `config` and `builtin`.'),
};

export const CatalogSkill = z.object({ ...Base, directory: z.string().describe('The directory holding SKILL.md and the files beside it.') }).meta({ id: 'CatalogSkill' });
export const CatalogCommand = z.object({ ...Base, argument_hint: z.string().nullable() }).meta({ id: 'CatalogCommand' });
export const CatalogAgent = z
  .object({ ...Base, tools: z.array(z.string()).nullable().describe('Null: every tool of the main agent but `task`.'), model: z.string().nullable() })
  .meta({ id: 'CatalogAgent' });
export const CatalogError = z
  .object({
    type: z.enum(['skill', 'command', 'agent']),
    source: CatalogSource,
    path: z.string().nullable(),
    error: z.string().describe('Why the file was skipped (the run goes on without it).'),
  })
  .meta({ id: 'CatalogError' });

export const SkillCatalog = z
  .object({
    skills: z.array(CatalogSkill),
    commands: z.array(CatalogCommand),
    agents: z.array(CatalogAgent),
    errors: z.array(CatalogError).describe('Malformed or unreadable files, each skipped.'),
  })
  .meta({ id: 'SkillCatalog' });
export type SkillCatalog = z.infer<typeof SkillCatalog>;
export type CatalogSkill = z.infer<typeof CatalogSkill>;
export type CatalogCommand = z.infer<typeof CatalogCommand>;
export type CatalogAgent = z.infer<typeof CatalogAgent>;
export type CatalogError = z.infer<typeof CatalogError>;
