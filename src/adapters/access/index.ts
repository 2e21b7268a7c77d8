// Access: API keys and the audit log in the data dir's files or PostgreSQL, bearer tokens verified with jose against a JWKS.
import path from 'node:path';
import type { Config } from '../../config.js';
import type { Storage } from '../storage/index.js';
import { KeyService } from '../../core/access/key-service.js';
import { QuotaMeter } from '../../core/access/quota-meter.js';
import { createSpendGuard, type SpendCheck } from '../../core/access/spend-guard.js';
import type { AuditLog } from '../../core/access/audit-log.js';
import type { KeyStore } from '../../core/access/key-store.js';
import { systemClock, type Clock } from '../../core/clock.js';
import type { ConversationStore } from '../../core/conversations/conversation-store.js';
import type { EventReader } from '../../core/events/event-recorder.js';
import type { AccessServices } from '../../core/access/access-services.js';
import { FileAuditLog } from './file-audit-log.js';
import { FileKeyStore } from './file-key-store.js';
import { createJwtVerifier } from './jwt-verifier.js';
import { PgAuditLog } from './pg-audit-log.js';
import { PgKeyStore } from './pg-key-store.js';

export interface Access {
  services: AccessServices;
  /** Before each LLM request of a run (AgentRuntime's `spendCheck`). */
  spendCheck: SpendCheck;
  /** Adds each LLM call's cost to its owner's spend (an event reader of `usage`). */
  spendReader: EventReader;
}

/** `store` is read lazily (it is built after the storage this needs). */
export function createAccess(config: Config, deps: { storage: Storage; store: () => ConversationStore; clock?: Clock | undefined }): Access {
  const clock = deps.clock ?? systemClock;
  const sql = deps.storage.postgres?.sql;
  const keyStore: KeyStore = sql ? new PgKeyStore(sql) : new FileKeyStore(path.join(config.dataDir, 'keys.json'), { fsync: config.fsync });
  const audit: AuditLog = sql ? new PgAuditLog(sql) : new FileAuditLog(path.join(config.dataDir, 'audit.log'), { fsync: config.fsync });
  const quotas = new QuotaMeter(
    {
      conversations: (owner) => deps.store().count(undefined, owner),
      runningRuns: (owner) => deps.store().count('running', owner),
    },
    { clock },
  );
  const ownerOf = (conversationId: string) => {
    const store = deps.store();
    return store.has(conversationId) ? (store.find(conversationId).owner ?? null) : undefined;
  };
  return {
    services: {
      mode: config.access.mode,
      keys: new KeyService(keyStore, { clock }),
      quotas,
      audit,
      now: () => clock.now(),
      verifyToken: config.access.jwt ? createJwtVerifier(config.access.jwt) : undefined,
      ownerOf,
    },
    spendCheck: createSpendGuard(quotas),
    spendReader: {
      name: 'spend',
      read: ({ event }) => {
        if (event.kind !== 'usage') return;
        const owner = ownerOf(event.conversation_id);
        if (owner && event.cost !== null) quotas.spent(owner, event.cost);
      },
    },
  };
}
