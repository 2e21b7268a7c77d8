import { AgentdClient, AgentdConnectionError, AgentdError } from '../client/index.js';
import type { EmbeddedServer } from './embedded-server.js';

export interface ConnectionFlags {
  url?: string;
  key?: string;
  dataDir?: string;
}

export interface Connection {
  client: AgentdClient;
  /** The server's address. */
  url: string;
  /** Set when the client runs its own server. */
  embedded: EmbeddedServer | null;
  close(): Promise<void>;
}

/** Where a key without a URL is tried: the address `agentd serve` listens on by default. */
export const DEFAULT_SERVER_URL = 'http://127.0.0.1:8000';

/**
 * Where a client command talks to: `--url`/`--key`, else AGENTD_URL/AGENTD_KEY (a key alone: the
 * default server's address, when a server answers there), else a server embedded in this process
 * (stopped by `close`).
 */
export async function connect(flags: ConnectionFlags): Promise<Connection> {
  const url = flags.url ?? (process.env.AGENTD_URL || undefined);
  const key = flags.key ?? (process.env.AGENTD_KEY || undefined);
  if (url) {
    const client = new AgentdClient({ url, ...(key ? { apiKey: key } : {}) });
    return { client, url, embedded: null, close: async () => {} };
  }
  if (key) {
    const client = new AgentdClient({ url: DEFAULT_SERVER_URL, apiKey: key });
    if (await answers(client)) return { client, url: DEFAULT_SERVER_URL, embedded: null, close: async () => {} };
    throw new UsageError(`AGENTD_KEY (or --key) is set but AGENTD_URL (or --url) is not, and no agentd answers at ${DEFAULT_SERVER_URL}: say which server to use (AGENTD_URL=http://host:port)`);
  }
  const { startEmbeddedServer } = await import('./embedded-server.js');
  const embedded = await startEmbeddedServer(flags.dataDir ? { dataDir: flags.dataDir } : {});
  return { client: new AgentdClient({ url: embedded.url, apiKey: embedded.apiKey }), url: embedded.url, embedded, close: () => embedded.close() };
}

/** Whether an agentd server answers at the client's address (any answer from agentd, even a refused key, counts). */
async function answers(client: AgentdClient): Promise<boolean> {
  try {
    await client.health.alive({ signal: AbortSignal.timeout(3000) });
    return true;
  } catch (error) {
    return error instanceof AgentdError && !(error instanceof AgentdConnectionError);
  }
}

/** What a CLI user does when no LLM is configured: the variables, not the HTTP route. */
export function noLlmMessage(remote: string | null): string {
  const variables = 'AGENTD_LLM_MODEL and its key (OPENAI_API_KEY; AGENTD_LLM_API_KEY and AGENTD_LLM_BASE_URL for another provider)';
  return remote === null
    ? `no LLM is configured: set ${variables} in your environment or in ~/.agentd/.env. Nothing was created.`
    : `the server at ${remote} has no default LLM: its operator sets ${variables}. Nothing was created.`;
}

/** A mistake in how the command was called: exit code 2. */
export class UsageError extends Error {
  override name = 'UsageError';
}
