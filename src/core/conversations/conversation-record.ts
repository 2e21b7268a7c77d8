import type { ConversationStatus } from '../schemas/event.js';
import type { AgentDefinitions } from '../schemas/catalog.js';
import type { PendingAction, SandboxSettings, Usage } from '../schemas/conversation.js';
import type { LlmConfig } from '../schemas/llm-config.js';
import type { Hooks, Permissions, SettingSources } from '../schemas/tool-control.js';
import type { McpServers } from '../schemas/mcp-servers.js';
import type { Damage, DamagedDataError } from '../errors.js';

/** What the server keeps about a conversation (events live in the event log). */
export interface ConversationRecord {
  id: string;
  title: string | null;
  status: ConversationStatus;
  workdir: string;
  /** The server created the workdir, so `delete_workdir=true` may remove it. */
  workdir_created: boolean;
  llm: LlmConfig | null;
  tools: string[];
  max_iterations_per_run: number;
  confirmation_mode: boolean;
  pending_actions: PendingAction[];
  current_run_id: string | null;
  usage: Usage;
  created_at: string;
  updated_at: string;
  metadata: Record<string, unknown>;
  /** How the agent's processes are sandboxed (absent in records written before it existed: network on). */
  sandbox?: SandboxSettings;
  /** MCP servers; env and header values are sealed at rest like secrets. */
  mcp_servers?: McpServers;
  /** Permission rules (absent in records written before they existed: none). */
  permissions?: Permissions;
  /** Lifecycle hooks; http hook secrets are sealed at rest like secrets. */
  hooks?: Hooks;
  /** Where project settings are read from (absent: `["project"]`). */
  setting_sources?: SettingSources;
  /** Subagent definitions (absent: none beyond the project's and the built-in one). */
  agents?: AgentDefinitions;
  /** Secret values by name, in plain text in memory only; the repository encrypts them at rest. */
  secrets: Record<string, string>;
  /**
   * Values the conversation's secrets had before a PUT replaced them or a DELETE removed them,
   * as (name, value) pairs: they stay masked (a file or a log may still hold them). Encrypted at
   * rest like `secrets`; absent in records written before it existed.
   */
  retired_secrets?: [string, string][];
  /** In memory only: set when the conversation's stored data is damaged (it is then never written). */
  quarantine?: Damage;
}

/** What loading found: the records, and the conversations whose record could not be read. */
export interface LoadedConversations {
  records: ConversationRecord[];
  damaged: { id: string; error: DamagedDataError }[];
}

/** Where conversation records persist. Writes are atomic: a crash leaves the old or the new record. */
export interface ConversationRepository {
  loadAll(): Promise<LoadedConversations>;
  save(record: ConversationRecord): void;
  remove(id: string): void;
}
