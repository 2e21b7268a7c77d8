import { buildApp } from '../app.js';
import { composeServices } from '../compose.js';
import { parseCli } from './command-line.js';
import { DataDirInUseError, DataDirLock } from '../adapters/files/index.js';
import { createLogger } from '../logger.js';

export interface EmbeddedServer {
  url: string;
  apiKey: string;
  dataDir: string;
  /** Whether new conversations get an LLM (AGENTD_LLM_MODEL is set). */
  hasDefaultLlm: boolean;
  close(): Promise<void>;
}

/**
 * The server inside the client's own process, on a private loopback port, over the data dir a
 * served agentd would use (`--data-dir`, AGENTD_DATA_DIR, ~/.agentd): `agentd run` works with no
 * server running. Its variables come from the user's environment and `~/.agentd/.env`, never from
 * a `.env` in the current directory. The key is the data dir's key (or AGENTD_MASTER_KEY). Logs go to stderr, errors
 * only unless AGENTD_LOG_LEVEL says otherwise.
 */
export async function startEmbeddedServer(options: { dataDir?: string } = {}): Promise<EmbeddedServer> {
  const env = { ...process.env, AGENTD_LOG_LEVEL: process.env.AGENTD_LOG_LEVEL || 'error' };
  // The directory the client runs in is the project's (often a cloned repository): its .env is data, never the server's configuration.
  const parsed = parseCli(['--host', '127.0.0.1', '--port', '0', ...(options.dataDir ? ['--data-dir', options.dataDir] : [])], env, { envFile: 'user' });
  if (parsed.action !== 'serve') throw new Error('unreachable: the embedded server is always served');
  for (const warning of parsed.warnings) process.stderr.write(`agentd: WARNING: ${warning}\n`);
  const { config } = parsed;
  let lock: DataDirLock;
  try {
    lock = DataDirLock.acquire(config.dataDir);
  } catch (error) {
    if (error instanceof DataDirInUseError) {
      throw new Error(`${error.message}. Point the client at that server instead: AGENTD_URL=http://host:port AGENTD_KEY=... (or --url/--key)`);
    }
    throw error;
  }
  const masker = { mask: (text: string) => text };
  const logger = createLogger({ level: config.logLevel, masker, destination: process.stderr });
  try {
    const services = await composeServices(config, logger);
    masker.mask = (text) => services.secrets.maskAny(text);
    const app = await buildApp(services);
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    let closing: Promise<void> | null = null;
    return {
      url,
      apiKey: services.masterKeys[0]!,
      dataDir: config.dataDir,
      hasDefaultLlm: config.defaultLlm !== null,
      close: () =>
        (closing ??= (async () => {
          await services.agent.stopAll();
          await app.close();
          await services.close();
          lock.release();
        })()),
    };
  } catch (error) {
    lock.release();
    throw error;
  }
}
