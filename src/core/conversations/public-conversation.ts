import { CONDENSER_DEFAULTS, type Conversation } from '../schemas/conversation.js';
import { redactLlmConfig } from '../schemas/llm-config.js';
import { publicMcpServers } from '../schemas/mcp-servers.js';
import { publicHooks } from '../schemas/tool-control.js';
import type { ConversationRecord } from './conversation-record.js';

/**
 * What a client sees of a conversation record: the LLM key, MCP and hook secrets redacted,
 * defaults filled in for fields older records lack; `eventCount` is what its log holds (0 while
 * it is quarantined).
 */
export function publicConversation(record: Readonly<ConversationRecord>, eventCount: number): Conversation {
  return {
    id: record.id,
    title: record.title,
    status: record.status,
    workdir: record.workdir,
    llm: record.llm ? redactLlmConfig(record.llm) : null,
    tools: record.tools,
    max_iterations_per_run: record.max_iterations_per_run,
    confirmation_mode: record.confirmation_mode,
    pending_actions: record.pending_actions,
    current_run_id: record.current_run_id,
    event_count: record.quarantine ? 0 : eventCount,
    // A copy: the record's totals grow in place (addUsage), a view is a snapshot (ConversationViews).
    usage: { ...record.usage, ...(record.usage.by_model && { by_model: Object.fromEntries(Object.entries(record.usage.by_model).map(([model, counts]) => [model, { ...counts }])) }) },
    created_at: record.created_at,
    updated_at: record.updated_at,
    metadata: record.metadata,
    owner: record.owner ?? null,
    sandbox: { network: record.sandbox?.network ?? true },
    mcp_servers: publicMcpServers(record.mcp_servers),
    project_mcp_servers: record.project_mcp_servers ?? false,
    permissions: record.permissions ?? {},
    hooks: publicHooks(record.hooks),
    setting_sources: record.setting_sources ?? ['project'],
    condenser: record.condenser === null ? null : { max_tokens: record.condenser?.max_tokens ?? null, keep_first: record.condenser?.keep_first ?? CONDENSER_DEFAULTS.keep_first, keep_last: record.condenser?.keep_last ?? CONDENSER_DEFAULTS.keep_last },
    multitask_strategy: record.multitask_strategy ?? 'enqueue',
    agents: record.agents ?? {},
    budget: record.budget ?? null,
    quarantine: record.quarantine ?? null,
  };
}