import type dns from 'node:dns';
import type { FetchLike, Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { McpRefusedError, type McpCallResult, type McpConnection, type McpConnector, type McpContent, type McpLaunch, type McpToolInfo } from '../../core/mcp/mcp-client.js';
import type { WebhookTargets } from '../../core/webhooks/webhook-targets.js';
import { buildCleanEnv, type ProcessLauncher } from '../process/process-launcher.js';
import { lazyModule } from '../../perf/lazy-module.js';
import { CheckedMcpFetch } from './checked-fetch.js';

/** The SDK, heavy on the heap with its schemas, loads at the first connection, not at start-up. */
const loadSdk = lazyModule(async () => {
  const [{ Client }, { SSEClientTransport }, { StdioClientTransport }, { StreamableHTTPClientTransport }, { ToolListChangedNotificationSchema }] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/sse.js'),
    import('@modelcontextprotocol/sdk/client/stdio.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]);
  return { Client, SSEClientTransport, StdioClientTransport, StreamableHTTPClientTransport, ToolListChangedNotificationSchema };
});

const STDERR_TAIL_CHARS = 2_000;
const CONNECT_TIMEOUT_MS = 20_000;

/**
 * MCP clients on the official SDK. Stdio servers are spawned through the ProcessLauncher, so they
 * run inside the conversation's sandbox, in its workdir, with a clean env plus its secrets.
 * Remote servers get Streamable HTTP first and the older HTTP+SSE transport when that fails;
 * their addresses follow the webhook policy (no loopback or private networks unless allowed),
 * checked on every connection as it is made (CheckedMcpFetch).
 */
export class SdkMcpConnector implements McpConnector {
  private readonly http: CheckedMcpFetch;

  /** `resolve`: how host names become addresses (dns.lookup; tests give their own). */
  constructor(private readonly options: { launcher: ProcessLauncher; targets: WebhookTargets; version: string; passEnv?: readonly string[]; hostEnv?: Readonly<Record<string, string | undefined>>; resolve?: typeof dns.lookup }) {
    this.http = new CheckedMcpFetch({ targets: options.targets, connectTimeoutMs: CONNECT_TIMEOUT_MS, ...(options.resolve && { resolve: options.resolve }) });
  }

  async connect(launch: McpLaunch, events: { onToolsChanged: () => void; onClosed: (why: string) => void; timeoutMs: number }): Promise<McpConnection> {
    if (launch.kind === 'stdio') return this.connectStdio(launch, events);
    const refusals: string[] = [];
    const fetch = this.http.forAttempt((reason) => refusals.push(reason));
    try {
      return await this.connectRemote(launch, fetch, events);
    } catch (error) {
      // The SDK words the failure its own way: the refusal seen underneath is what the client needs to hear.
      if (refusals.length > 0) throw new McpRefusedError(refusals[0]!);
      throw error;
    }
  }

  /** Stops the HTTP client of remote servers (the server is shutting down). */
  async close(): Promise<void> {
    await this.http.close();
  }

  private async connectRemote(launch: Extract<McpLaunch, { kind: 'remote' }>, fetch: FetchLike, events: { onToolsChanged: () => void; onClosed: (why: string) => void; timeoutMs: number }): Promise<McpConnection> {
    const { SSEClientTransport, StreamableHTTPClientTransport } = await loadSdk();
    const options = { requestInit: { headers: launch.headers }, fetch };
    if (launch.type === 'sse') return this.open(new SSEClientTransport(new URL(launch.url), options), 'sse', events, () => '');
    try {
      return await this.open(new StreamableHTTPClientTransport(new URL(launch.url), options), 'http', events, () => '');
    } catch (streamable) {
      try {
        return await this.open(new SSEClientTransport(new URL(launch.url), options), 'sse', events, () => '');
      } catch (sse) {
        throw new Error(`Streamable HTTP: ${(streamable as Error).message}; HTTP+SSE: ${(sse as Error).message}`);
      }
    }
  }

  private async connectStdio(launch: Extract<McpLaunch, { kind: 'stdio' }>, events: { onToolsChanged: () => void; onClosed: (why: string) => void; timeoutMs: number }): Promise<McpConnection> {
    const { StdioClientTransport } = await loadSdk();
    const env = buildCleanEnv({ workdir: launch.workdir, passEnv: this.options.passEnv ?? [], extra: launch.env, ...(this.options.hostEnv ? { hostEnv: this.options.hostEnv } : {}) });
    const spec = this.options.launcher.prepare({ command: launch.command, args: launch.args, cwd: launch.workdir, env, sandbox: { workdir: launch.workdir, network: launch.sandbox.network } });
    const transport = new StdioClientTransport({ command: spec.command, args: spec.args, env: spec.env, cwd: spec.cwd, stderr: 'pipe' });
    let tail = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      tail = (tail + chunk.toString('utf8')).slice(-STDERR_TAIL_CHARS);
    });
    const release = once(() => spec.release?.());
    try {
      const connection = await this.open(transport, 'stdio', { ...events, onClosed: (why) => { release(); events.onClosed(why); } }, () => tail.trim());
      return { ...connection, close: async () => { await connection.close(); release(); } };
    } catch (error) {
      release();
      throw error;
    }
  }

  private async open(transport: Transport, kind: McpConnection['transport'], events: { onToolsChanged: () => void; onClosed: (why: string) => void; timeoutMs: number }, stderr: () => string): Promise<McpConnection> {
    const { Client, ToolListChangedNotificationSchema } = await loadSdk();
    const client = new Client({ name: 'agentd', version: this.options.version }, { capabilities: {} });
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => events.onToolsChanged());
    let connected = false;
    client.onclose = () => {
      if (connected) events.onClosed(withStderr('the connection closed', stderr()));
    };
    try {
      await client.connect(transport, { timeout: events.timeoutMs });
    } catch (error) {
      await client.close().catch(() => undefined);
      throw new Error(withStderr((error as Error).message, stderr()));
    }
    connected = true;
    return {
      transport: kind,
      async listTools(): Promise<McpToolInfo[]> {
        const tools: McpToolInfo[] = [];
        let cursor: string | undefined;
        for (let page = 0; page < 50; page++) {
          const result = await client.listTools(cursor ? { cursor } : undefined, { timeout: events.timeoutMs });
          for (const tool of result.tools) tools.push({ name: tool.name, description: tool.description ?? '', inputSchema: tool.inputSchema as Record<string, unknown> });
          cursor = result.nextCursor;
          if (!cursor) break;
        }
        return tools;
      },
      async callTool(name, args, options): Promise<McpCallResult> {
        const result = await client.callTool({ name, arguments: args }, undefined, { signal: options.signal, timeout: options.timeoutMs, resetTimeoutOnProgress: true });
        const content = Array.isArray(result.content) ? (result.content as McpContent[]) : [];
        return { content, isError: result.isError === true, ...(result.structuredContent !== undefined && { structuredContent: result.structuredContent }) };
      },
      async close(): Promise<void> {
        connected = false;
        await client.close();
      },
    };
  }
}

function withStderr(message: string, stderr: string): string {
  return stderr ? `${message} (stderr: ${stderr.slice(-500)})` : message;
}

function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}
