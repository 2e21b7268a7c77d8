import fs from 'node:fs/promises';
import path from 'node:path';
import { McpServerConfig, type McpServers } from '../schemas/mcp-servers.js';

const MAX_BYTES = 256 * 1024;

/** The workdir's `.mcp.json` `mcpServers`: entries that do not validate are reported, not started. */
export async function readProjectMcpServers(workdir: string): Promise<{ servers: McpServers; invalid: { name: string; error: string }[] }> {
  const servers: McpServers = {};
  const invalid: { name: string; error: string }[] = [];
  let parsed: unknown;
  try {
    const handle = await fs.open(path.join(workdir, '.mcp.json'), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    try {
      const stat = await handle.stat();
      if (!stat.isFile() || stat.size > MAX_BYTES) return { servers, invalid: [{ name: '.mcp.json', error: 'not a regular file of at most 256 KiB' }] };
      parsed = JSON.parse(await handle.readFile('utf8'));
    } finally {
      await handle.close();
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { servers, invalid };
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
