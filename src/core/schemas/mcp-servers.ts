import { z } from 'zod';

const ServerName = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,40}$/, 'a server name is 1-40 letters, digits, _ or -')
  .refine((name) => !name.includes('__'), 'a server name cannot contain "__" (tool names are mcp__<server>__<tool>)');
const Values = z.record(z.string().min(1).max(256), z.string().max(65_536)).refine((values) => Object.keys(values).length <= 100, 'at most 100 entries');

export const StdioMcpServer = z
  .object({
    type: z.literal('stdio').optional(),
    command: z.string().min(1).max(4096),
    args: z.array(z.string().max(65_536)).max(200).optional(),
    env: Values.optional().describe('Extra environment (values may reference the conversation\'s secrets as `${NAME}`); never returned.'),
  })
  .strict()
  .describe("Started inside the conversation's sandbox, in its workdir, with its secrets in the environment.")
  .meta({ id: 'StdioMcpServer' });

export const RemoteMcpServer = z
  .object({
    type: z.enum(['http', 'sse']).optional().describe('`http`: Streamable HTTP (default, falling back to HTTP+SSE); `sse`: the older HTTP+SSE transport only.'),
    url: z.url({ protocol: /^https?$/ }).max(4096),
    headers: Values.optional().describe('Request headers (values may reference secrets as `${NAME}`); never returned.'),
  })
  .strict()
  .meta({ id: 'RemoteMcpServer' });

export const McpServerConfig = z.union([StdioMcpServer, RemoteMcpServer]).meta({ id: 'McpServerConfig' });
export type McpServerConfig = z.infer<typeof McpServerConfig>;

export const McpServers = z
  .record(ServerName, McpServerConfig)
  .refine((servers) => Object.keys(servers).length <= 20, 'at most 20 MCP servers')
  .describe('MCP servers in the `.mcp.json` `mcpServers` shape; their tools appear as `mcp__<server>__<tool>`. Env and header values are shown as `********`.')
  .meta({ id: 'McpServers' });
export type McpServers = z.infer<typeof McpServers>;

export const ProjectMcpServers = z
  .union([z.boolean(), z.array(ServerName).max(20)])
  .describe(
    "Which servers of the workdir's `.mcp.json` may start (with `setting_sources` holding `project`): `false` (default) none, `true` all, or a list of their names. The agent can write that file, so its servers are off until the client turns them on, and their `${NAME}` references are never expanded from the conversation's secrets.",
  )
  .meta({ id: 'ProjectMcpServers' });
export type ProjectMcpServers = z.infer<typeof ProjectMcpServers>;

export const McpServerStatus = z
  .object({
    name: z.string(),
    transport: z.enum(['stdio', 'http', 'sse']),
    source: z.enum(['conversation', 'project', 'server']).describe('Where the server is configured: the conversation, the workdir\'s `.mcp.json`, or AGENTD_MCP_CONFIG.'),
    status: z.enum(['connecting', 'connected', 'failed', 'disabled']),
    tools: z.array(z.string()).describe('Tool names as the LLM sees them (`mcp__<server>__<tool>`).'),
    error: z
      .string()
      .optional()
      .describe('Why the server failed (its tools are missing meanwhile; it is retried with backoff, or at the next run when a policy refused it), or why it is `disabled`.'),
  })
  .meta({ id: 'McpServerStatus' });
export type McpServerStatus = z.infer<typeof McpServerStatus>;

export const McpStatusList = z.object({ servers: z.array(McpServerStatus) }).meta({ id: 'McpStatusList' });

const MASK = '********';

/** The servers as returned: env and header values are secrets, never shown. */
export function publicMcpServers(servers: McpServers | undefined): McpServers {
  const out: McpServers = {};
  for (const [name, server] of Object.entries(servers ?? {})) {
    if ('command' in server) out[name] = { ...server, ...(server.env && { env: maskValues(server.env) }) };
    else out[name] = { ...server, ...(server.headers && { headers: maskValues(server.headers) }) };
  }
  return out;
}

function maskValues(values: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.keys(values).map((key) => [key, MASK]));
}

/** `${NAME}` and `${NAME:-default}` in env and header values, from the conversation's secrets (Claude Code's .mcp.json expansion). */
export function expandSecrets(value: string, secrets: Readonly<Record<string, string>>): string {
  return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g, (_whole, name: string, fallback: string | undefined) => secrets[name] ?? fallback ?? '');
}
