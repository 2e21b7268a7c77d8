/** How callers authenticate (AGENTD_AUTH and the AGENTD_JWT_* variables), checked at boot. */
export interface AccessConfig {
  mode: 'master' | 'keys' | 'jwt';
  jwt: { jwksUrl: string; issuer: string | null; audience: string | null; ownerClaim: string; scopesClaim: string } | null;
}

interface AccessEnv {
  AGENTD_AUTH: 'master' | 'keys' | 'jwt';
  AGENTD_JWT_JWKS_URL?: string | undefined;
  AGENTD_JWT_ISSUER?: string | undefined;
  AGENTD_JWT_AUDIENCE?: string | undefined;
  AGENTD_JWT_OWNER_CLAIM: string;
  AGENTD_JWT_SCOPES_CLAIM: string;
}

/** `fail` makes the config's error (jwt mode without its JWKS URL). */
export function accessConfigFrom(e: AccessEnv, fail: (message: string) => Error): AccessConfig {
  if (e.AGENTD_AUTH !== 'jwt') return { mode: e.AGENTD_AUTH, jwt: null };
  if (!e.AGENTD_JWT_JWKS_URL) throw fail('AGENTD_AUTH=jwt needs AGENTD_JWT_JWKS_URL');
  return {
    mode: 'jwt',
    jwt: { jwksUrl: e.AGENTD_JWT_JWKS_URL, issuer: e.AGENTD_JWT_ISSUER ?? null, audience: e.AGENTD_JWT_AUDIENCE ?? null, ownerClaim: e.AGENTD_JWT_OWNER_CLAIM, scopesClaim: e.AGENTD_JWT_SCOPES_CLAIM },
  };
}
