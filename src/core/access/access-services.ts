import type { AuditLog } from './audit-log.js';
import type { KeyService } from './key-service.js';
import type { Principal } from './principal.js';
import type { QuotaMeter } from './quota-meter.js';

/** Who may do what: keys, their limits and the audit log, as the routes and hooks use them. */
export interface AccessServices {
  /** `master`: the master key(s) only; `keys`: and API keys; `jwt`: and tokens from the identity provider too. */
  mode: 'master' | 'keys' | 'jwt';
  keys: KeyService;
  quotas: QuotaMeter;
  audit: AuditLog;
  /** The clock of quotas and audit entries. */
  now(): number;
  /** A bearer token verified against the JWKS (jwt mode); null when it is not a valid token. */
  verifyToken?: ((token: string) => Promise<Principal | null>) | undefined;
  /** The owner of a conversation held here: undefined when not held, null when it has none. */
  ownerOf(conversationId: string): string | null | undefined;
}
