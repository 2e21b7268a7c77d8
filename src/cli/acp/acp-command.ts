import { Readable, Writable } from 'node:stream';
import * as acp from '@agentclientprotocol/sdk';
import { connect, UsageError } from '../connection.js';
import { EXIT } from '../exit-codes.js';
import { createAcpAgent } from './acp-agent.js';

export interface AcpFlags {
  url?: string;
  keyEnv?: string;
  dataDir?: string;
}

/**
 * `agentd acp`: an Agent Client Protocol agent on stdin/stdout for an editor (Zed, JetBrains,
 * Neovim, Emacs), a client of an agentd server: `--url`/AGENTD_URL with the key in AGENTD_KEY (or
 * the variable `--key-env` names), else one embedded in this process over the data dir. stdout
 * carries ACP alone; everything else goes to stderr. Ends when the editor closes stdin.
 */
export async function acpCommand(flags: AcpFlags): Promise<number> {
  // A stray console.log (ours or a library's) would corrupt the protocol stream.
  for (const method of ['log', 'info', 'debug'] as const) console[method] = (...args: unknown[]) => console.error(...args);
  const keyVariable = flags.keyEnv ?? 'AGENTD_KEY';
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(keyVariable)) throw new UsageError(`--key-env takes the name of an environment variable, not ${keyVariable}`);
  const key = process.env[keyVariable] || undefined;
  const connection = await connect({ ...(flags.url ? { url: flags.url } : {}), ...(key ? { key } : {}), ...(flags.dataDir ? { dataDir: flags.dataDir } : {}) });
  const log = (line: string) => void process.stderr.write(`agentd acp: ${line}\n`);
  log(connection.embedded ? `serving from the data dir ${connection.embedded.dataDir}` : `client of ${connection.url}`);
  try {
    const agent = createAcpAgent({ client: connection.client, embedded: connection.embedded !== null, url: connection.url, log });
    const stream = acp.ndJsonStream(Writable.toWeb(process.stdout) as WritableStream<Uint8Array>, Readable.toWeb(process.stdin) as ReadableStream<Uint8Array>);
    const open = agent.connect(stream);
    await open.closed;
    return EXIT.ok;
  } finally {
    await connection.close();
  }
}
