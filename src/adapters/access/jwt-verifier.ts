import type { JWTPayload } from 'jose';
import type { AccessConfig } from '../../core/access/access-config.js';
import type { Principal } from '../../core/access/principal.js';
import { SCOPES, type Scope } from '../../core/access/scopes.js';

const KNOWN = new Set<string>(SCOPES);

/**
 * Bearer tokens from an identity provider, verified with jose against its JWKS (fetched and
 * cached by jose, refetched when a token names a key it has not seen): signature, expiry,
 * issuer and audience. The owner and scopes come from the configured claims.
 */
export function createJwtVerifier(settings: NonNullable<AccessConfig['jwt']>): (token: string) => Promise<Principal | null> {
  // jose is loaded at the first token, not at start-up: its module reaches for Node's global fetch,
  // which loads Node's own undici into every server, whatever its AGENTD_AUTH.
  let verifier: Promise<{ jwtVerify: typeof import('jose').jwtVerify; keys: ReturnType<typeof import('jose').createRemoteJWKSet> }> | undefined;
  const load = () =>
    (verifier ??= import('jose').then((jose) => ({ jwtVerify: jose.jwtVerify, keys: jose.createRemoteJWKSet(new URL(settings.jwksUrl)) })));
  return async (token) => {
    if (token.split('.').length !== 3) return null;
    let payload: JWTPayload;
    try {
      const { jwtVerify, keys } = await load();
      ({ payload } = await jwtVerify(token, keys, { ...(settings.issuer && { issuer: settings.issuer }), ...(settings.audience && { audience: settings.audience }) }));
    } catch {
      return null;
    }
    const owner = payload[settings.ownerClaim];
    if (typeof owner !== 'string' || owner.length === 0) return null;
    const scopes = new Set(scopesOf(payload[settings.scopesClaim]));
    return { keyId: `jwt:${payload.sub ?? owner}`, owner, scopes, admin: scopes.has('keys:admin'), limits: null, allowedModels: null, rotated: false };
  };
}

function scopesOf(claim: unknown): Scope[] {
  const names = typeof claim === 'string' ? claim.split(/\s+/) : Array.isArray(claim) ? claim.filter((item): item is string => typeof item === 'string') : [];
  return names.filter((name): name is Scope => KNOWN.has(name));
}
