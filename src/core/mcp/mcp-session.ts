import type { McpServerStatus } from '../schemas/mcp-servers.js';
import type { ToolDefinition, ToolResult } from '../tools/tool.js';
import { McpRefusedError, type McpConnection, type McpConnector, type McpLaunch, type McpToolInfo } from './mcp-client.js';
import { mcpResultToObservation, mcpToolDefinition } from './mcp-tool.js';

export interface McpServerEntry {
  name: string;
  source: McpServerStatus['source'];
  transport: McpServerStatus['transport'];
  /** Compared between runs: a changed config restarts the server. Holds no secret values. */
  fingerprint: string;
  launch: () => McpLaunch;
  /** Set when the server may not start (a project server the client did not enable): why. */
  disabled?: string;
}

interface ServerState {
  entry: McpServerEntry;
  status: 'idle' | 'connecting' | 'connected' | 'failed' | 'disabled';
  tools: McpToolInfo[];
  error: string | null;
  /** Set when a policy refused the last connection (McpRefusedError): the reason, masked. */
  refused: string | null;
  connection: McpConnection | null;
  starting: Promise<void> | null;
  failures: number;
  retryTimer: NodeJS.Timeout | null;
  /** Bumped on every (re)start and stop: callbacks of an older connection are ignored. */
  generation: number;
}

export const MCP_LIMITS = { startTimeoutMs: 20_000, callTimeoutMs: 10 * 60_000, backoffBaseMs: 1_000, backoffMaxMs: 30_000, maxRestarts: 5 };

/**
 * The MCP servers of one conversation: started when a run first needs them, restarted with
 * backoff when they die (a bounded number of times, then again at the next run), stopped with the
 * conversation. A server that fails never fails the run: its tools are missing and the status
 * says why.
 */
export class McpSession {
  private readonly servers = new Map<string, ServerState>();
  private closed = false;

  constructor(
    private readonly deps: { connector: McpConnector; onToolsChanged: () => void; mask: (text: string) => string; limits?: typeof MCP_LIMITS },
  ) {}

  private get limits(): typeof MCP_LIMITS {
    return this.deps.limits ?? MCP_LIMITS;
  }

  /** Sets the servers wanted now: new ones are added, removed or changed ones stopped. */
  configure(entries: McpServerEntry[]): void {
    const wanted = new Map(entries.map((entry) => [entry.name, entry]));
    for (const [name, state] of this.servers) {
      const next = wanted.get(name);
      if (next && next.fingerprint === state.entry.fingerprint) {
        state.entry = next;
        continue;
      }
      this.stop(state);
      this.servers.delete(name);
    }
    for (const entry of entries) {
      if (!this.servers.has(entry.name)) {
        const disabled = entry.disabled ?? null;
        this.servers.set(entry.name, { entry, status: disabled === null ? 'idle' : 'disabled', tools: [], error: disabled, refused: null, connection: null, starting: null, failures: 0, retryTimer: null, generation: 0 });
      }
    }
  }

  /** Starts every server not running (a failed one gets a fresh set of restarts); resolves when each has connected or failed. */
  async start(): Promise<void> {
    const waits: Promise<void>[] = [];
    for (const state of this.servers.values()) {
      if (state.status === 'failed' && state.retryTimer === null) state.failures = 0;
      if (state.status === 'idle' || (state.status === 'failed' && state.retryTimer === null)) waits.push(this.connect(state));
      else if (state.starting) waits.push(state.starting);
    }
    await Promise.all(waits);
  }

  tools(): ToolDefinition[] {
    const out: ToolDefinition[] = [];
    for (const state of this.servers.values()) {
      if (state.status !== 'connected') continue;
      for (const tool of state.tools) {
        const definition = mcpToolDefinition({ server: state.entry.name, tool, call: (args, signal) => this.call(state, tool.name, args, signal) });
        if (definition) out.push(definition);
      }
    }
    return out;
  }

  /** The servers a policy refused at their last attempt, with why. */
  refusals(): { name: string; source: McpServerStatus['source']; reason: string }[] {
    return [...this.servers.values()].flatMap((state) => (state.status === 'failed' && state.refused !== null ? [{ name: state.entry.name, source: state.entry.source, reason: state.refused }] : []));
  }

  status(): McpServerStatus[] {
    return [...this.servers.values()].map((state) => ({
      name: state.entry.name,
      transport: state.entry.transport,
      source: state.entry.source,
      status: state.status === 'idle' ? 'connecting' : state.status,
      tools: state.status === 'connected' ? this.tools().filter((tool) => tool.name.startsWith(`mcp__${state.entry.name}__`)).map((tool) => tool.name) : [],
      ...(state.error !== null && { error: state.error }),
    }));
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.servers.values()].map((state) => this.stop(state)));
  }

  private connect(state: ServerState): Promise<void> {
    if (this.closed) return Promise.resolve();
    const generation = ++state.generation;
    state.status = 'connecting';
    state.error = null;
    state.refused = null;
    const current = () => state.generation === generation && !this.closed;
    state.starting = (async () => {
      let connection: McpConnection | null = null;
      try {
        connection = await this.deps.connector.connect(state.entry.launch(), {
          timeoutMs: this.limits.startTimeoutMs,
          onToolsChanged: () => {
            if (current()) void this.refresh(state, generation);
          },
          onClosed: (why) => {
            if (current() && state.status === 'connected') this.failed(state, `the server stopped: ${why}`);
          },
        });
        if (!current()) {
          await connection.close().catch(() => undefined);
          return;
        }
        state.connection = connection;
        state.tools = await connection.listTools();
        if (!current()) return;
        state.status = 'connected';
        state.failures = 0;
        this.deps.onToolsChanged();
      } catch (error) {
        if (connection) await connection.close().catch(() => undefined);
        if (!current()) return;
        if (error instanceof McpRefusedError) this.refused(state, describe(error));
        else this.failed(state, describe(error));
      } finally {
        if (state.generation === generation) state.starting = null;
      }
    })();
    return state.starting;
  }

  /** A policy refused it: retrying would be refused again, so the next run's start tries anew. */
  private refused(state: ServerState, why: string): void {
    state.status = 'failed';
    state.error = this.deps.mask(why);
    state.refused = state.error;
    state.tools = [];
    state.failures = this.limits.maxRestarts + 1;
  }

  private failed(state: ServerState, why: string): void {
    const wasConnected = state.status === 'connected';
    const connection = state.connection;
    state.connection = null;
    state.status = 'failed';
    state.error = this.deps.mask(why);
    state.tools = [];
    state.generation += 1;
    void connection?.close().catch(() => undefined);
    if (wasConnected) this.deps.onToolsChanged();
    state.failures += 1;
    if (this.closed || state.failures > this.limits.maxRestarts) return;
    const delay = Math.min(this.limits.backoffMaxMs, this.limits.backoffBaseMs * 2 ** (state.failures - 1));
    state.retryTimer = setTimeout(() => {
      state.retryTimer = null;
      if (state.status === 'failed') void this.connect(state);
    }, delay);
    state.retryTimer.unref();
  }

  private async refresh(state: ServerState, generation: number): Promise<void> {
    try {
      const tools = await state.connection?.listTools();
      if (!tools || state.generation !== generation) return;
      state.tools = tools;
      this.deps.onToolsChanged();
    } catch {
      // the connection is going away: onClosed reports it
    }
  }

  private async call(state: ServerState, tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<ToolResult> {
    const connection = state.connection;
    if (!connection || state.status !== 'connected') {
      return { isError: true, content: `The MCP server "${state.entry.name}" is not connected${state.error ? `: ${state.error}` : ''}.`, data: { error: 'mcp_server_unavailable' } };
    }
    try {
      return mcpResultToObservation(await connection.callTool(tool, args, { signal, timeoutMs: this.limits.callTimeoutMs }));
    } catch (error) {
      if (signal.aborted) return { isError: true, content: 'Interrupted: the run was stopped while this tool was running.', data: { interrupted: true } };
      const stopped = state.connection !== connection || state.status !== 'connected';
      const why = this.deps.mask(describe(error));
      return {
        isError: true,
        content: stopped ? `The MCP server "${state.entry.name}" stopped during the call (${state.error ?? why}). It is being restarted; try again later.` : `${tool} failed: ${why}`,
        data: { error: stopped ? 'mcp_server_stopped' : 'mcp_call_failed' },
      };
    }
  }

  private async stop(state: ServerState): Promise<void> {
    if (state.status === 'disabled') return;
    state.generation += 1;
    if (state.retryTimer) clearTimeout(state.retryTimer);
    state.retryTimer = null;
    const connection = state.connection;
    state.connection = null;
    state.status = 'idle';
    state.tools = [];
    await connection?.close().catch(() => undefined);
  }
}

function describe(error: unknown): string {
  const message = (error as Error)?.message ?? String(error);
  return message.length > 2000 ? `${message.slice(0, 2000)}…` : message;
}
