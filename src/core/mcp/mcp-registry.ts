import type { ConversationRecord } from '../conversations/conversation-record.js';
import { expandSecrets, type McpServerConfig, type McpServers, type McpServerStatus } from '../schemas/mcp-servers.js';
import type { ToolDefinition } from '../tools/tool.js';
import type { McpConnector, McpLaunch } from './mcp-client.js';
import { McpSession, type McpServerEntry, type MCP_LIMITS } from './mcp-session.js';
import { readProjectMcpServers } from './project-mcp-config.js';
import type { ProjectFiles } from '../workspace/project-files.js';

/**
 * Every conversation's MCP servers. Configuration is merged by name: the server's defaults
 * (AGENTD_MCP_CONFIG), then the workdir's `.mcp.json` when `setting_sources` includes
 * `project`, then the conversation's `mcp_servers`.
 */
export class McpRegistry {
  private readonly sessions = new Map<string, { session: McpSession; listeners: Set<() => void>; invalid: { name: string; error: string }[] }>();

  constructor(
    private readonly deps: {
      connector: McpConnector;
      /** Reads the workdir's `.mcp.json`. */
      projectFiles: ProjectFiles;
      serverDefaults: McpServers;
      secretsOf: (record: ConversationRecord) => Record<string, string>;
      sandboxOf: (record: ConversationRecord) => { network: boolean | 'host' };
      mask: (conversationId: string, text: string) => string;
      limits?: typeof MCP_LIMITS;
    },
  ) {}

  /** Whether the conversation may have servers at all (checked without waiting, before a run's first turn). */
  configured(record: ConversationRecord): boolean {
    if (this.sessions.has(record.id) || Object.keys(this.deps.serverDefaults).length > 0 || Object.keys(record.mcp_servers ?? {}).length > 0) return true;
    return (record.setting_sources ?? ['project']).includes('project') && this.deps.projectFiles.exists(record.workdir, '.mcp.json');
  }

  /** Brings the conversation's servers up (bounded) and returns their tools; `onChange` hears list changes. */
  async prepare(record: ConversationRecord): Promise<ToolDefinition[]> {
    const holder = await this.configure(record);
    await holder.session.start();
    return holder.session.tools();
  }

  tools(conversationId: string): ToolDefinition[] {
    return this.sessions.get(conversationId)?.session.tools() ?? [];
  }

  /** Listen to tool list changes of a conversation (returns the unsubscribe). */
  onToolsChanged(conversationId: string, listener: () => void): () => void {
    const holder = this.sessions.get(conversationId);
    holder?.listeners.add(listener);
    return () => holder?.listeners.delete(listener);
  }

  /** GET /mcp: the status of each server; asking starts the ones not started yet (in the background). */
  async status(record: ConversationRecord): Promise<McpServerStatus[]> {
    const holder = await this.configure(record);
    void holder.session.start();
    const invalid: McpServerStatus[] = holder.invalid.map(({ name, error }) => ({ name, transport: 'stdio', source: 'project', status: 'failed', tools: [], error }));
    return [...holder.session.status(), ...invalid];
  }

  async close(conversationId: string): Promise<void> {
    const holder = this.sessions.get(conversationId);
    this.sessions.delete(conversationId);
    await holder?.session.close();
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.sessions.keys()].map((id) => this.close(id)));
  }

  private async configure(record: ConversationRecord) {
    let holder = this.sessions.get(record.id);
    if (!holder) {
      const listeners = new Set<() => void>();
      const session = new McpSession({
        connector: this.deps.connector,
        onToolsChanged: () => {
          for (const listener of listeners) listener();
        },
        mask: (text) => this.deps.mask(record.id, text),
        ...(this.deps.limits && { limits: this.deps.limits }),
      });
      holder = { session, listeners, invalid: [] };
      this.sessions.set(record.id, holder);
    }
    const project = (record.setting_sources ?? ['project']).includes('project') ? await readProjectMcpServers(this.deps.projectFiles, record.workdir) : { servers: {}, invalid: [] };
    const merged = new Map<string, { config: McpServerConfig; source: McpServerStatus['source'] }>();
    for (const [name, config] of Object.entries(this.deps.serverDefaults)) merged.set(name, { config, source: 'server' });
    for (const [name, config] of Object.entries(project.servers)) merged.set(name, { config, source: 'project' });
    for (const [name, config] of Object.entries(record.mcp_servers ?? {})) merged.set(name, { config, source: 'conversation' });
    const entries: McpServerEntry[] = [...merged].map(([name, { config, source }]) => ({
      name,
      source,
      transport: 'command' in config ? 'stdio' : (config.type ?? 'http'),
      // Secret values stay out of the fingerprint's readers: it is only compared, never shown.
      fingerprint: JSON.stringify([source, config, record.workdir, this.deps.sandboxOf(record)]),
      launch: () => this.launchOf(record, config),
    }));
    holder.session.configure(entries);
    holder.invalid = project.invalid;
    return holder;
  }

  private launchOf(record: ConversationRecord, config: McpServerConfig): McpLaunch {
    const secrets = this.deps.secretsOf(record);
    const expand = (values: Record<string, string> | undefined) => Object.fromEntries(Object.entries(values ?? {}).map(([key, value]) => [key, expandSecrets(value, secrets)]));
    if ('command' in config) {
      return { kind: 'stdio', command: config.command, args: config.args ?? [], env: { ...secrets, ...expand(config.env) }, workdir: record.workdir, sandbox: this.deps.sandboxOf(record) };
    }
    return { kind: 'remote', type: config.type, url: config.url, headers: expand(config.headers) };
  }
}
