/**
 * How an instance connects to NATS: credentials and TLS from AGENTD_NATS_URL, AGENTD_NATS_CREDS
 * and AGENTD_NATS_TLS_CA, as the client's own authenticators. The URL handed to the client has
 * its credentials taken out, so that no error or log line of the client can carry them.
 * - `nats://user:password@host:port`: a user and password; `nats://token@host:port`: a token.
 * - AGENTD_NATS_CREDS: a file, either a `.creds` file (a user JWT and its NKey seed, as `nsc`
 *   writes it) or an NKey seed alone (`SU...`, for a server listing the user's public NKey).
 * - `tls://host:port`: TLS, verified against the system's CAs or AGENTD_NATS_TLS_CA.
 */
import { readFileSync } from 'node:fs';
import { credsAuthenticator, nkeyAuthenticator, tokenAuthenticator, usernamePasswordAuthenticator, type Authenticator, type NodeConnectionOptions } from '@nats-io/transport-node';

export interface NatsAccess {
  url: string;
  /** A `.creds` file or an NKey seed file. */
  credsFile?: string | null;
  /** A PEM file of the CA that signed the server's certificate. */
  tlsCaFile?: string | null;
}

/** The connection options: the server without credentials, the authenticators, TLS. Throws a message that names no secret. */
export function natsConnectionOptions(access: NatsAccess): Pick<NodeConnectionOptions, 'servers' | 'authenticator' | 'tls'> {
  const url = new URL(access.url);
  const tls = url.protocol === 'tls:' || access.tlsCaFile;
  const authenticators: Authenticator[] = [];
  const user = decodeURIComponent(url.username);
  const password = decodeURIComponent(url.password);
  if (user && password) authenticators.push(usernamePasswordAuthenticator(user, password));
  else if (user) authenticators.push(tokenAuthenticator(user));
  else if (password) throw new Error('AGENTD_NATS_URL has a password but no user');
  if (access.credsFile) authenticators.push(fileAuthenticator(access.credsFile));
  const server = `${url.hostname.includes(':') ? `[${url.hostname}]` : url.hostname}:${url.port || '4222'}`;
  return {
    servers: `${tls ? 'tls' : 'nats'}://${server}`,
    ...(authenticators.length > 0 && { authenticator: authenticators }),
    ...(tls && { tls: access.tlsCaFile ? { caFile: access.tlsCaFile } : {} }),
  };
}

/** A `.creds` file (JWT and seed) or a bare NKey seed: read again at each connect, so a rotated file is picked up. */
function fileAuthenticator(file: string): Authenticator {
  const read = () => readFileSync(file);
  const text = read().toString('utf8');
  if (text.includes('BEGIN NATS USER JWT')) return credsAuthenticator(() => new Uint8Array(read()));
  if (/^\s*SU[A-Z2-7]{50,}\s*$/.test(text)) return nkeyAuthenticator(() => new TextEncoder().encode(read().toString('utf8').trim()));
  throw new Error('AGENTD_NATS_CREDS is neither a .creds file (a user JWT and its seed) nor an NKey user seed (SU...)');
}
