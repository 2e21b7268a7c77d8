import { z } from 'zod';
import { CondenserInput, Conversation, Quarantine, SandboxSettings } from '../schemas/conversation.js';
import { MultitaskStrategy } from '../schemas/event.js';
import { StoredLlmConfig } from '../schemas/llm-config.js';
import { Hooks, Permissions, SettingSources } from '../schemas/tool-control.js';
import { McpServers, ProjectMcpServers } from '../schemas/mcp-servers.js';
import { AgentDefinitions } from '../schemas/catalog.js';
import { Budget } from '../schemas/budget.js';
import type { DamagedDataError } from '../errors.js';
import type { ConversationSummary } from './summary-store.js';

/**
 * What the server keeps about a conversation (events live in the event log): the public
 * Conversation less what is computed (event_count) or shown redacted, plus what never leaves
 * the server. Stores parse what they read back with it; fields added after a record was
 * written are optional here (absent in older records).
 */
export const ConversationRecord = Conversation.omit({ owner: true, event_count: true, llm: true, sandbox: true, mcp_servers: true, project_mcp_servers: true, permissions: true, hooks: true, setting_sources: true, agents: true, quarantine: true, condenser: true, multitask_strategy: true }).extend({
  /** The owner of the key that created it (absent in records from before owners: the admin's). */
  owner: z.string().optional(),
  /** The server created the workdir, so `delete_workdir=true` may remove it. */
  workdir_created: z.boolean(),
  /** The key in plain text in memory only (sealed at rest). */
  llm: StoredLlmConfig.nullable(),
  /** How the agent's processes are sandboxed (absent in records written before it existed: network on). */
  sandbox: SandboxSettings.optional(),
  /** MCP servers; env and header values are sealed at rest like secrets. */
  mcp_servers: McpServers.optional(),
  /** Which of the workdir's `.mcp.json` servers may start (absent: none). */
  project_mcp_servers: ProjectMcpServers.optional(),
  /** Permission rules (absent in records written before they existed: none). */
  permissions: Permissions.optional(),
  /** Lifecycle hooks; http hook secrets are sealed at rest like secrets. */
  hooks: Hooks.optional(),
  /** Where project settings are read from (absent: `["project"]`). */
  setting_sources: SettingSources.optional(),
  /**
   * The project's ask and deny rules (`.claude/settings.json`) as read once, before the
   * conversation's first tool call was checked: an agent that rewrites the file changes nothing
   * for the next run. Absent: not read yet (a PUT /config of `setting_sources` has them read again).
   */
  project_permissions: z.object({ ask: z.array(z.string()), deny: z.array(z.string()) }).optional(),
  /** Condenser settings (absent: the defaults; null: automatic condensation off). */
  condenser: CondenserInput.optional(),
  /** What a message sent during a run does (absent: `enqueue`). */
  multitask_strategy: MultitaskStrategy.optional(),
  /** Subagent definitions (absent: none beyond the project's and the built-in one). */
  agents: AgentDefinitions.optional(),
  /** What a run or the conversation may spend (absent or null: the server's default). */
  budget: Budget.nullable().optional(),
  /** Secret values by name, in plain text in memory only; the repository encrypts them at rest. */
  secrets: z.record(z.string(), z.string()),
  /**
   * Values the conversation's secrets had before a PUT replaced them or a DELETE removed them,
   * as (name, value) pairs: they stay masked (a file or a log may still hold them). Encrypted at
   * rest like `secrets`; absent in records written before it existed.
   */
  retired_secrets: z.array(z.tuple([z.string(), z.string()])).optional(),
  /** In memory only: set when the conversation's stored data is damaged (it is then never written). */
  quarantine: Quarantine.optional(),
});
export type ConversationRecord = z.infer<typeof ConversationRecord>;

/** The config fields a client may change after creation (PUT /config), already checked. */
export type ConfigChange = Partial<
  Pick<ConversationRecord, 'llm' | 'workdir' | 'workdir_created' | 'max_iterations_per_run' | 'title' | 'mcp_servers' | 'project_mcp_servers' | 'permissions' | 'hooks' | 'setting_sources' | 'project_permissions' | 'confirmation_mode' | 'condenser' | 'multitask_strategy' | 'agents' | 'budget'>
>;

/** What loading found: the records, and the conversations whose record could not be read. */
export interface LoadedConversations {
  records: ConversationRecord[];
  damaged: { id: string; error: DamagedDataError }[];
  /**
   * The summary of `records[i]`'s log as a snapshot kept it, when the log is provably as it was
   * then (files); else undefined. By place, not id: no map of every id to build and look up.
   */
  summaryAt?: (i: number) => ConversationSummary | undefined;
  /**
   * The records come from what the clean shutdown just before this start saved (files: its
   * snapshot, named by the token its summaries.json carried): that shutdown ended and recorded
   * every run before it saved them, and nothing has written since. Never set after a crash.
   */
  rightAfterCleanStop?: boolean;
}

/** Where conversation records persist. Writes are atomic: a crash leaves the old or the new record. */
export interface ConversationRepository {
  /**
   * `afterCleanStop`: the last server stopped cleanly (nothing was cut short by a crash).
   * `snapshotToken`: and its summaries are in the records snapshot it wrote with this token, true
   * while nothing has saved or appended since (files): its records are taken as they are.
   */
  loadAll(options?: { afterCleanStop?: boolean; snapshotToken?: string }): Promise<LoadedConversations>;
  save(record: ConversationRecord): void;
  /** A promise when the removal finishes later (files: off the event loop); the record is gone once it settles. */
  remove(id: string): void | Promise<void>;
  /**
   * At a clean shutdown (files): all records kept together, with their logs' summaries, so that the
   * next start need not read each one. Resolves to the token the snapshot carries (undefined: none kept).
   */
  saveSnapshot?(records: Iterable<Readonly<ConversationRecord>>, summaries: ReadonlyMap<string, ConversationSummary>): Promise<string | undefined>;
}
