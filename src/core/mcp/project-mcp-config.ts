import { McpServerConfig, type McpServers } from '../schemas/mcp-servers.js';
import type { ProjectFiles } from '../workspace/project-files.js';

const MAX_BYTES = 256 * 1024;

/** The workdir's `.mcp.json` `mcpServers`: entries that do not validate are reported, not started. */
export async function readProjectMcpServers(projectFiles: ProjectFiles, workdir: string): Promise<{ servers: McpServers; invalid: { name: string; error: string }[] }> {
  const servers: McpServers = {};
  const invalid: { name: string; error: string }[] = [];
  const read = await projectFiles.read({ dir: workdir, name: '.mcp.json', maxBytes: MAX_BYTES, oversize: 'refuse', symlinks: 'never' });
  if (read.kind === 'missing') return { servers, invalid };
  if (read.kind === 'refused') return { servers, invalid: [{ name: '.mcp.json', error: 'not a regular file of at most 256 KiB' }] };
  if (read.kind === 'unreadable') return { servers, invalid: [{ name: '.mcp.json', error: `unreadable: ${read.message}` }] };
  let parsed: unknown;
  try {
    parsed = JSON.parse(read.text);
  } catch (error) {
    return { servers, invalid: [{ name: '.mcp.json', error: `unreadable: ${(error as Error).message}` }] };
  }
  const block = (parsed as { mcpServers?: unknown } | null)?.mcpServers;
  if (typeof block !== 'object' || block === null) return { servers, invalid };
  for (const [name, value] of Object.entries(block)) {
    const checked = McpServerConfig.safeParse(value);
    if (checked.success && /^[A-Za-z0-9_-]{1,40}$/.test(name) && !name.includes('__')) servers[name] = checked.data;
    else invalid.push({ name, error: 'invalid entry in .mcp.json' });
  }
  return { servers, invalid };
}
