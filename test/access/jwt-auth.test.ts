import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type TestServer } from '../support/agentd.js';
import { client } from '../support/access-matrix.js';

let server: TestServer;
let jwks: http.Server;
let privateKey: CryptoKey;
let strangerKey: CryptoKey;

function token(claims: Record<string, unknown>, options: { key?: CryptoKey; issuer?: string; audience?: string; expires?: string } = {}): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'RS256', kid: 'test' })
    .setSubject(String(claims.sub ?? 'user-1'))
    .setIssuer(options.issuer ?? 'https://id.example')
    .setAudience(options.audience ?? 'agentd')
    .setIssuedAt()
    .setExpirationTime(options.expires ?? '5m')
    .sign(options.key ?? privateKey);
}

beforeAll(async () => {
  const pair = await generateKeyPair('RS256');
  privateKey = pair.privateKey;
  strangerKey = (await generateKeyPair('RS256')).privateKey;
  const publicJwk = { ...(await exportJWK(pair.publicKey)), kid: 'test', alg: 'RS256', use: 'sig' };
  // The identity provider's JWKS, served on loopback by the test.
  jwks = http.createServer((_request, response) => response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [publicJwk] })));
  await new Promise<void>((resolve) => jwks.listen(0, '127.0.0.1', resolve));
  const { port } = jwks.address() as AddressInfo;
  server = await startServer({
    env: {
      AGENTD_AUTH: 'jwt',
      AGENTD_JWT_JWKS_URL: `http://127.0.0.1:${port}/.well-known/jwks.json`,
      AGENTD_JWT_ISSUER: 'https://id.example',
      AGENTD_JWT_AUDIENCE: 'agentd',
      AGENTD_JWT_OWNER_CLAIM: 'org',
      AGENTD_JWT_SCOPES_CLAIM: 'permissions',
    },
  });
});

afterAll(async () => {
  await server?.close();
  await new Promise((resolve) => jwks?.close(resolve));
});

describe('AGENTD_AUTH=jwt', () => {
  it('takes the owner and scopes from the configured claims', async () => {
    const acme = client(server.url, await token({ org: 'acme', permissions: ['conversations:read', 'conversations:write'] }));
    const created = await acme('POST', '/conversations', {});
    expect(created.status).toBe(201);
    expect(created.body.owner).toBe('acme');
    const other = client(server.url, await token({ sub: 'user-2', org: 'globex', permissions: 'conversations:read conversations:write' }));
    expect((await other('GET', `/conversations/${created.body.id}`)).status).toBe(404);
    expect((await other('GET', '/conversations')).body.items).toEqual([]);
    const denied = await acme('POST', `/conversations/${created.body.id}/commands`, { command: 'true' });
    expect(denied.status).toBe(403);
    expect(denied.body).toMatchObject({ error: 'insufficient_scope', details: { scope: 'commands:run' } });
  });

  it('refuses a token signed by another key, for another audience or issuer, or expired', async () => {
    const claims = { org: 'acme', permissions: ['conversations:read'] };
    for (const bad of [
      await token(claims, { key: strangerKey }),
      await token(claims, { audience: 'someone-else' }),
      await token(claims, { issuer: 'https://evil.example' }),
      await token(claims, { expires: '-1m' }),
      await token({ permissions: ['conversations:read'] }),
    ]) {
      expect((await client(server.url, bad)('GET', '/conversations')).status).toBe(401);
    }
  });

  it('still takes the master key', async () => {
    expect((await client(server.url, 'test-master-key')('GET', '/conversations')).status).toBe(200);
  });
});
