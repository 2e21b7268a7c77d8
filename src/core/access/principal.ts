import type { KeyLimits } from './api-key.js';
import { SCOPES, type Scope } from './scopes.js';

/** Who a request is from, once its credential checked out. */
export interface Principal {
  /** The key's id; `master` for the master key; `jwt:<subject>` for a token. */
  keyId: string;
  owner: string;
  scopes: ReadonlySet<Scope>;
  /** Sees every owner's resources (the master key, or a key with `keys:admin`). */
  admin: boolean;
  limits: KeyLimits | null;
  allowedModels: readonly string[] | null;
  /** The secret used was the one before a rotation, still in its grace period. */
  rotated: boolean;
}

/** The owner of what the master key creates. */
export const ADMIN_OWNER = 'admin';

export const MASTER_PRINCIPAL: Principal = Object.freeze({
  keyId: 'master',
  owner: ADMIN_OWNER,
  scopes: new Set(SCOPES),
  admin: true,
  limits: null,
  allowedModels: null,
  rotated: false,
});

/** Whether `principal` may see a resource of `owner` (records from before owners existed have none: admins only). */
export function mayAccess(principal: Principal, owner: string | null | undefined): boolean {
  return principal.admin || owner === principal.owner;
}
