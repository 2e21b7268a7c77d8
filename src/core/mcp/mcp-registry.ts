import type { ConversationRecord } from '../conversations/conversation-record.js';
import { expandSecrets, type McpServerConfig, type McpServers, type McpServerStatus } from '../schemas/mcp-servers.js';
import type { ToolDefinition } from '../tools/tool.js';
import { McpRefusedError, type McpConnector, type McpLaunch } from './mcp-client.js';
import { McpSession, type McpServerEntry, type MCP_LIMITS } from './mcp-session.js';
import { readProjectMcpServers } from './project-mcp-config.js';
import type { ProjectFiles } from '../workspace/project-files.js';

/**
 * Every conversation's MCP servers. Configuration is merged by name: the server's defaults
 * (AGENTD_MCP_CONFIG), then the workdir's `.mcp.json` when `setting_sources` includes
 * `project`, then the conversation's `mcp_servers`. The workdir's servers are written by whoever
 * controls the workdir, the agent included: they start only when the client enabled them
 * (`project_mcp_servers`) and never get `${NAME}` expanded from the secrets. Remote servers are
 * reached from the server's own network, so a conversation without network gets none.
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
    // Names come from a file the agent writes: masked like any other text that leaves.
    const mask = (text: string) => this.deps.mask(record.id, text);
    return [...holder.session.status(), ...invalid].map((status) => ({ ...status, name: mask(status.name), tools: status.tools.map(mask), ...(status.error !== undefined && { error: mask(status.error) }) }));
  }

  /** The servers a policy refused when this run's start tried them (recorded as `mcp_refused` events). */
  refusals(conversationId: string): { name: string; source: McpServerStatus['source']; reason: string }[] {
    return this.sessions.get(conversationId)?.session.refusals() ?? [];
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
    const entries: McpServerEntry[] = [...merged].map(([name, { config, source }]) => {
      const disabled = source === 'project' && !projectServerEnabled(record, name) ? PROJECT_SERVER_DISABLED : undefined;
      return {
        name,
        source,
        transport: 'command' in config ? 'stdio' : (config.type ?? 'http'),
        // Secret values stay out of the fingerprint's readers: it is only compared, never shown.
        fingerprint: JSON.stringify([source, config, record.workdir, this.deps.sandboxOf(record), disabled ?? null]),
        launch: () => this.launchOf(record, config, source),
        ...(disabled !== undefined && { disabled }),
      };
    });
    holder.session.configure(entries);
    holder.invalid = project.invalid;
    return holder;
  }

  private launchOf(record: ConversationRecord, config: McpServerConfig, source: McpServerStatus['source']): McpLaunch {
    const secrets = this.deps.secretsOf(record);
    const sandbox = this.deps.sandboxOf(record);
    // A project file's `${NAME}` stays as written: expanding it would hand the secrets to whoever wrote the file.
    const expand = (values: Record<string, string> | undefined) => Object.fromEntries(Object.entries(values ?? {}).map(([key, value]) => [key, source === 'project' ? value : expandSecrets(value, secrets)]));
    if ('command' in config) {
      // In the sandbox, like the agent's shell, which has the secrets in its environment too; a project file cannot replace them.
      const env = source === 'project' ? { ...expand(config.env), ...secrets } : { ...secrets, ...expand(config.env) };
      return { kind: 'stdio', command: config.command, args: config.args ?? [], env, workdir: record.workdir, sandbox };
    }
    if (sandbox.network === false) throw new McpRefusedError('refused: this conversation has no network (sandbox.network: false), so no remote MCP server is connected to');
    return { kind: 'remote', type: config.type, url: config.url, headers: expand(config.headers) };
  }
}

const PROJECT_SERVER_DISABLED = "configured in the workdir's .mcp.json, which the agent can write: project MCP servers start only when the conversation enables them (project_mcp_servers: true, or a list of names)";

function projectServerEnabled(record: ConversationRecord, name: string): boolean {
  const enabled = record.project_mcp_servers ?? false;
  return enabled === true || (Array.isArray(enabled) && enabled.includes(name));
}
