import { AgentdClient } from '../client/index.js';
import type { EmbeddedServer } from './embedded-server.js';

export interface ConnectionFlags {
  url?: string;
  key?: string;
  dataDir?: string;
}

export interface Connection {
  client: AgentdClient;
  /** Set when the client runs its own server. */
  embedded: EmbeddedServer | null;
  close(): Promise<void>;
}

/**
 * Where a client command talks to: `--url`/`--key`, else AGENTD_URL/AGENTD_KEY, else a server
 * embedded in this process (stopped by `close`).
 */
export async function connect(flags: ConnectionFlags): Promise<Connection> {
  const url = flags.url ?? (process.env.AGENTD_URL || undefined);
  const key = flags.key ?? (process.env.AGENTD_KEY || undefined);
  if (url) {
    const client = new AgentdClient({ url, ...(key ? { apiKey: key } : {}) });
    return { client, embedded: null, close: async () => {} };
  }
  if (key) throw new UsageError('AGENTD_KEY (or --key) is set but AGENTD_URL (or --url) is not: say which server to use');
  const { startEmbeddedServer } = await import('./embedded-server.js');
  const embedded = await startEmbeddedServer(flags.dataDir ? { dataDir: flags.dataDir } : {});
  return { client: new AgentdClient({ url: embedded.url, apiKey: embedded.apiKey }), embedded, close: () => embedded.close() };
}

/** A mistake in how the command was called: exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}
