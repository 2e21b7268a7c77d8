/** What the core needs from an MCP client (the adapter wraps the official SDK). */
export interface McpToolInfo {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

export type McpContent =
  | { type: 'text'; text: string }
  | { type: 'image'; data: string; mimeType: string }
  | { type: 'audio'; data: string; mimeType: string }
  | { type: 'resource'; uri: string; text?: string; mimeType?: string; blob?: string }
  | { type: 'resource_link'; uri: string; name?: string };

export interface McpCallResult {
  content: McpContent[];
  isError: boolean;
  structuredContent?: unknown;
}

export interface McpConnection {
  readonly transport: 'stdio' | 'http' | 'sse';
  listTools(): Promise<McpToolInfo[]>;
  callTool(name: string, args: Record<string, unknown>, options: { signal: AbortSignal; timeoutMs: number }): Promise<McpCallResult>;
  close(): Promise<void>;
}

/** A resolved server to start: stdio (command in the sandbox) or remote (url). Values are expanded, never logged. */
export type McpLaunch =
  | { kind: 'stdio'; command: string; args: string[]; env: Record<string, string>; workdir: string; sandbox: { network: boolean | 'host' } }
  | { kind: 'remote'; type: 'http' | 'sse' | undefined; url: string; headers: Record<string, string> };

export interface McpConnector {
  /**
   * Connects and initializes. `onToolsChanged` fires on tools/list_changed; `onClosed` when the
   * connection ends (the server exited or the stream broke) with what is known about why.
   */
  connect(launch: McpLaunch, events: { onToolsChanged: () => void; onClosed: (why: string) => void; timeoutMs: number }): Promise<McpConnection>;
}

/** A connection a policy forbids (the conversation's network, the address policy): not retried until the next run. */
export class McpRefusedError extends Error {
  override readonly name = 'McpRefusedError';
}
