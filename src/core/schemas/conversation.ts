import { z } from 'zod';
import { Usage } from './usage.js';
import { Budget } from './budget.js';
import { Timestamp } from './common.js';
import { MessageContent } from './message-content.js';
import { ConversationStatus, MultitaskStrategy } from './event.js';
import { LlmConfigInput, LlmConfigPublic } from './llm-config.js';
import { Hooks, Permissions, SettingSources } from './tool-control.js';
import { McpServers, ProjectMcpServers } from './mcp-servers.js';
import { AgentDefinitions } from './catalog.js';

export { LlmUsage, Usage } from './usage.js';

export const PendingAction = z
  .object({
    tool_call_id: z.string(),
    tool_name: z.string(),
    arguments: z.record(z.string(), z.unknown()),
    event_id: z.uuid().describe('The `action` event awaiting approval.'),
  })
  .meta({ id: 'PendingAction' });
export type PendingAction = z.infer<typeof PendingAction>;

const Metadata = z.record(z.string(), z.unknown());
/** The most JSON a conversation's `metadata` may hold: it is in every list page and every response. */
export const MAX_METADATA_BYTES = 16 * 1024;
const MetadataInput = Metadata.refine((value) => Buffer.byteLength(JSON.stringify(value)) <= MAX_METADATA_BYTES, {
  message: `metadata may hold at most ${MAX_METADATA_BYTES / 1024} KiB of JSON`,
}).describe(`Free-form JSON the client keeps with the conversation (at most ${MAX_METADATA_BYTES / 1024} KiB).`);

export const SandboxNetwork = z
  .union([z.boolean(), z.literal('host')])
  .describe(
    "The network of the agent's shell and commands. true: the internet through user-mode networking in a network namespace of their own (the host's loopback, the server and other local services are out of reach); false: no network, only a loopback interface of their own; \"host\": the host's network, loopback included (only when the operator allows it: AGENTD_SANDBOX_NETWORK_HOST=true).",
  )
  .meta({ id: 'SandboxNetwork' });
export type SandboxNetwork = z.infer<typeof SandboxNetwork>;

export const SandboxSettings = z.object({ network: SandboxNetwork }).strict().meta({ id: 'SandboxSettings' });
export type SandboxSettings = z.output<typeof SandboxSettings>;

export const NewSandboxSettings = z
  .object({ network: SandboxNetwork.optional().describe("Default: the server's (AGENTD_SANDBOX_NETWORK, normally true).") })
  .strict()
  .meta({ id: 'NewSandboxSettings' });
const Title = z.string().max(500);
const MaxIterations = z.int().min(1).max(100_000);
const SecretName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'a secret name is an environment variable name')
  // A JSON key `__proto__` would be dropped, not stored, by any plain object it is copied into.
  .refine((name) => name !== '__proto__', 'a secret cannot be named __proto__');

export const SecretsMap = z
  .record(SecretName, z.string().max(65_536))
  .refine((secrets) => Object.keys(secrets).length <= 200, 'at most 200 secrets');

export const CONDENSER_DEFAULTS = { keep_first: 1, keep_last: 10 } as const;

/** The condenser as a client sets it (create body, PUT /config); null turns it off. */
export const CondenserInput = z
  .object({
    max_tokens: z.int().min(1000).max(100_000_000).optional().describe("Condense when the last request's prompt passed this many tokens. Default: 75% of the model's context window when agentd knows the model, else AGENTD_CONDENSER_MAX_TOKENS."),
    keep_first: z.int().min(0).max(1000).optional().describe(`Messages at the start of the LLM history (after the system prompt) that are never condensed (default ${CONDENSER_DEFAULTS.keep_first}: the task as first given).`),
    keep_last: z.int().min(0).max(10_000).optional().describe(`The most recent messages kept as they are (default ${CONDENSER_DEFAULTS.keep_last}; more when the cut would separate a tool call from its result).`),
  })
  .strict()
  .nullable()
  .describe('Summarizes the middle of a long LLM history (see POST /condense); null turns automatic condensation off. A message, an assistant reply and a tool result each count as one message.')
  .meta({ id: 'CondenserRequest' });
export type CondenserInput = z.infer<typeof CondenserInput>;

export const Condenser = z
  .object({
    max_tokens: z.int().nullable().describe("The threshold set; null: the default (75% of the model's context window when known, else the server's)."),
    keep_first: z.int(),
    keep_last: z.int(),
  })
  .nullable()
  .describe('null: automatic condensation is off (POST /condense still works).')
  .meta({ id: 'Condenser' });
export type Condenser = z.infer<typeof Condenser>;

export const Quarantine = z
  .object({
    file: z.string().describe("The damaged file, relative to the conversation's directory in the data dir."),
    line: z.int().nullable().describe('The damaged line (1-based) when the file has lines.'),
    reason: z.string(),
  })
  .meta({ id: 'Quarantine' });

export const Conversation = z
  .object({
    id: z.uuid(),
    title: z.string().nullable(),
    status: ConversationStatus,
    workdir: z.string(),
    llm: LlmConfigPublic.nullable().describe('Null when no model is configured (neither in the request nor the server env).'),
    tools: z.array(z.string()),
    max_iterations_per_run: z.int(),
    confirmation_mode: z.boolean(),
    pending_actions: z.array(PendingAction),
    current_run_id: z.uuid().nullable(),
    event_count: z.int().min(0),
    usage: Usage,
    created_at: Timestamp,
    updated_at: Timestamp,
    metadata: Metadata,
    owner: z.string().nullable().describe("Who the conversation belongs to: the owner of the key that created it (read-only; null for conversations from before owners)."),
    sandbox: SandboxSettings,
    mcp_servers: McpServers,
    project_mcp_servers: ProjectMcpServers,
    permissions: Permissions,
    hooks: Hooks.describe('Lifecycle hooks (an http hook\'s `secret` is shown as `********`).'),
    setting_sources: SettingSources,
    condenser: Condenser,
    multitask_strategy: MultitaskStrategy,
    agents: AgentDefinitions,
    budget: Budget.nullable().describe("What a run or the conversation may spend (null: none; the server's default applies, AGENTD_BUDGET)."),
    quarantine: Quarantine.nullable().describe(
      'Set when stored data of this conversation is damaged (status `error`): its files are kept as found for inspection, and every request but reading this summary and DELETE answers 409 `conversation_quarantined`.',
    ),
  })
  .meta({ id: 'Conversation' });
export type Conversation = z.infer<typeof Conversation>;

export const CreateConversationBody = z
  .object({
    workdir: z.string().min(1).max(4096).optional().describe('Absolute path; default: a fresh dir under AGENTD_WORKDIR_BASE.'),
    llm: LlmConfigInput.optional(),
    tools: z.array(z.string().min(1).max(64)).max(64).optional().describe('Tool names; default: all built-ins.'),
    max_iterations_per_run: MaxIterations.default(500),
    confirmation_mode: z.boolean().default(false),
    secrets: SecretsMap.optional(),
    initial_message: z.string().min(1).max(1_000_000).optional(),
    run: z.boolean().optional().describe('Start a run with the initial message (default true when a message is given).'),
    title: Title.optional(),
    metadata: MetadataInput.optional(),
    sandbox: NewSandboxSettings.optional().describe("How the agent's processes are sandboxed (when the server runs a sandbox); default: the server's network policy."),
    mcp_servers: McpServers.optional(),
    project_mcp_servers: ProjectMcpServers.optional(),
    permissions: Permissions.optional(),
    hooks: Hooks.optional(),
    setting_sources: SettingSources.optional(),
    condenser: CondenserInput.optional(),
    multitask_strategy: MultitaskStrategy.optional(),
    agents: AgentDefinitions.optional(),
    budget: Budget.optional().describe("Default: the server's (AGENTD_BUDGET), if any."),
  })
  .strict()
  .meta({ id: 'CreateConversation' });
export type CreateConversationBody = z.infer<typeof CreateConversationBody>;

export const UpdateConversationConfigBody = z
  .object({
    llm: LlmConfigInput.partial().strict().optional().describe('Merged into the current LLM config.'),
    workdir: z.string().min(1).max(4096).optional(),
    max_iterations_per_run: MaxIterations.optional(),
    title: Title.nullable().optional(),
    mcp_servers: McpServers.optional().describe('Replaces the MCP servers (changed ones restart at the next run).'),
    project_mcp_servers: ProjectMcpServers.optional(),
    permissions: Permissions.optional().describe('Replaces the permission rules.'),
    hooks: Hooks.optional().describe('Replaces the hooks.'),
    setting_sources: SettingSources.optional(),
    condenser: CondenserInput.optional().describe('Replaces the condenser settings; null turns automatic condensation off.'),
    multitask_strategy: MultitaskStrategy.optional(),
    agents: AgentDefinitions.optional().describe('Replaces the subagent definitions.'),
    budget: Budget.nullable().optional().describe("Replaces the budget; null: the server's default."),
  })
  .strict()
  .meta({ id: 'UpdateConversationConfig' });
export type UpdateConversationConfigBody = z.infer<typeof UpdateConversationConfigBody>;

export const ConversationSort = z.enum(['created_at', 'updated_at']);
export const SortOrder = z.enum(['asc', 'desc']);

export const PostMessageBody = z
  .object({
    content: MessageContent,
    run: z.boolean().default(true).describe('Start (or feed) a run; false only records the message.'),
    output_schema: z
      .record(z.string(), z.unknown())
      .optional()
      .describe('A JSON Schema the run\'s final answer must match: the validated value is the run\'s `output` (GET /runs/{run_id}). Invalid answers are sent back to the model with the errors, a bounded number of times.'),
    multitask_strategy: MultitaskStrategy.optional().describe("What this message does when a run is in progress (default: the conversation's `multitask_strategy`). With `run: false` the message is only recorded."),
  })
  .strict()
  .meta({ id: 'PostMessage' });
export type PostMessageBody = z.infer<typeof PostMessageBody>;

export const CondenseBody = z
  .object({
    instructions: z.string().max(10_000).optional().describe('What the summary should keep in particular (like `/compact <instructions>`).'),
  })
  .strict()
  .meta({ id: 'CondenseRequest' });
export type CondenseBody = z.infer<typeof CondenseBody>;

export const CondenseAccepted = z
  .object({
    run_id: z.uuid().nullable().describe('The run in progress that condenses before its next LLM request; null: the condensation started now.'),
    forgotten_from_seq: z.int().describe('The first event to be summarized, as planned now (a run in progress may summarize more).'),
    forgotten_to_seq: z.int(),
  })
  .meta({ id: 'CondenseAccepted' });
