// Access: API keys, the limits' counters and the audit log in the data dir's files or PostgreSQL, bearer tokens verified with jose against a JWKS.
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
import { MemoryQuotaCounters } from '../../core/access/memory-quota-counters.js';
import type { QuotaCounters } from '../../core/access/quota-counters.js';
import type { Logger } from 'pino';
import { FileAuditLog } from './file-audit-log.js';
import { FileKeyStore } from './file-key-store.js';
import { fileSpendLedger } from './file-spend-ledger.js';
import { createJwtVerifier } from './jwt-verifier.js';
import { PgAuditLog } from './pg-audit-log.js';
import { PgKeyStore } from './pg-key-store.js';
import { PgQuotaCounters } from './pg-quota-counters.js';

export interface Access {
  services: AccessServices;
  /** Before each LLM request of a run (AgentRuntime's `spendCheck`). */
  spendCheck: SpendCheck;
  /** Adds each LLM call's cost to its owner's spend (an event reader of `usage`). */
  spendReader: EventReader;
  /** Writes the spend not yet saved (at shutdown, once runs have stopped). */
  flush(): void;
}

/** `store` is read lazily (it is built after the storage this needs). */
export function createAccess(config: Config, deps: { storage: Storage; store: () => ConversationStore; logger: Logger; clock?: Clock | undefined }): Access {
  const clock = deps.clock ?? systemClock;
  const sql = deps.storage.postgres?.sql;
  const keyStore: KeyStore = sql ? new PgKeyStore(sql) : new FileKeyStore(path.join(config.dataDir, 'keys.json'), { fsync: config.fsync });
  const audit: AuditLog = sql ? new PgAuditLog(sql) : new FileAuditLog(path.join(config.dataDir, 'audit.log'), { fsync: config.fsync });
  // Instances sharing a database count in its rows; a server on files counts alone and keeps the spend in its data dir.
  const ledger = sql ? null : fileSpendLedger(path.join(config.dataDir, 'spend.json'), { fsync: config.fsync, onDamaged: (aside) => deps.logger.warn({ file: aside }, 'the spend ledger did not parse: set aside, spend counts from zero') });
  const counters: QuotaCounters = ledger ? new MemoryQuotaCounters({ clock, persistence: ledger }) : new PgQuotaCounters(sql!, clock);
  const keys = new KeyService(keyStore, { clock });
  const quotas = new QuotaMeter(
    {
      holdings: {
        conversations: (owner) => deps.store().count(undefined, owner),
        runningRuns: (owner) => deps.store().count('running', owner),
      },
      counters,
      keyLimits: async (owner) => (await keys.list(owner)).flatMap((key) => (key.limits ? [key.limits] : [])),
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
      keys,
      quotas,
      audit,
      now: () => clock.now(),
      verifyToken: config.access.jwt ? createJwtVerifier(config.access.jwt) : undefined,
      ownerOf,
    },
    spendCheck: createSpendGuard(quotas),
    flush: () => ledger?.flush(),
    spendReader: {
      name: 'spend',
      read: ({ event }) => {
        if (event.kind !== 'usage') return;
        const owner = ownerOf(event.conversation_id);
        if (owner && event.cost !== null) quotas.spent(owner, event.cost).catch((error: unknown) => deps.logger.error({ err: error, owner, conversation_id: event.conversation_id }, 'spend not counted'));
      },
    },
  };
}
