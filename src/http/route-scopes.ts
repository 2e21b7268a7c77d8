import type { FastifySchema } from 'fastify';
import { SCOPES, type Scope } from '../core/access/scopes.js';

/** The OpenAPI security scheme every route names (app.ts registers it). */
export const SECURITY_SCHEME = 'bearerAuth';

/**
 * A route's `schema.security`: the scope a key needs to call it, declared once and shown in the
 * OpenAPI document. `anyKey()`: any valid key (GET /keys/me); `publicRoute()`: no key at all.
 */
export function requires(scope: Scope): { [SECURITY_SCHEME]: Scope[] }[] {
  return [{ [SECURITY_SCHEME]: [scope] }];
}

export function anyKey(): { [SECURITY_SCHEME]: never[] }[] {
  return [{ [SECURITY_SCHEME]: [] }];
}

export function publicRoute(): never[] {
  return [];
}

const KNOWN = new Set<string>(SCOPES);

/**
 * The scopes a route accepts (any one of them); `[]` for any valid key; undefined when the route
 * declares none (then only an admin may call it: a route added without a scope fails closed).
 */
export function declaredScopes(schema: FastifySchema | undefined): Scope[] | undefined {
  const security = (schema as { security?: Record<string, string[]>[] } | undefined)?.security;
  if (!security || security.length === 0) return undefined;
  return security.flatMap((entry) => entry[SECURITY_SCHEME] ?? []).filter((scope): scope is Scope => KNOWN.has(scope));
}
