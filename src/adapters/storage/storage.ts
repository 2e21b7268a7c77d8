import type { AppError } from '../../core/errors.js';
import type { Sql } from 'postgres';
import type { EventFeed } from '../cluster/event-feed.js';
import type { PgConversationRepository } from '../postgres/pg-conversation-repository.js';
import type { PgEventLog } from '../postgres/pg-event-log.js';
import type { Fence } from '../postgres/pg-event-store.js';
import type { PgLeases } from '../postgres/pg-leases.js';
import type { PgRunStore } from '../postgres/pg-run-store.js';
import type { PgWebhookStore } from '../postgres/pg-webhook-store.js';
import type { WritePipeline } from '../postgres/write-pipeline.js';
import type { RunStore } from '../../core/agent/run-record.js';
import type { ConversationRepository } from '../../core/conversations/conversation-record.js';
import type { SummaryStore } from '../../core/conversations/summary-store.js';
import type { Damage } from '../../core/errors.js';
import type { EventLog } from '../../core/events/event-log.js';
import type { WebhookStore } from '../../core/webhooks/subscription-state.js';
import type { ScheduleStore } from '../../core/schedules/schedule-store.js';

export interface StorageCheck {
  ok: boolean;
  detail: string | null;
}

/** Where everything persists: the data dir's files, or PostgreSQL (AGENTD_DATABASE_URL). */
export interface Storage {
  kind: 'files' | 'postgres';
  log: EventLog;
  runs: RunStore;
  repository: ConversationRepository;
  summaries: SummaryStore;
  webhooks: WebhookStore & { damaged(): { id: string; damage: Damage; path: string }[] };
  schedules: ScheduleStore;
  /** This process, as the holder of schedule leases and fire claims (the instance id on PostgreSQL). */
  instanceId: string;
  /** Resolves once every write made so far is durable (at once for files: their writes are synchronous). */
  durable(): Promise<void>;
  /** The database and the feed, for /health (empty on files). */
  checks(): Promise<Record<string, StorageCheck>>;
  /** The contract's error for a failure to reach the store (a database that is down), or null when `error` is something else. */
  unavailable(error: unknown): AppError | null;
  /** Set on PostgreSQL: what the cluster layer needs. */
  postgres: PostgresStorage | null;
  close(): Promise<void>;
}

export interface PostgresStorage {
  sql: Sql;
  log: PgEventLog;
  runs: PgRunStore;
  repository: PgConversationRepository;
  writes: WritePipeline;
  feed: EventFeed | null;
  webhooks: PgWebhookStore;
  leases: PgLeases;
  /** This process's id in the leases and the instance registry. */
  instanceId: string;
  /** The fence of each conversation this instance holds (set by the ownership layer). */
  fences: Map<string, Fence>;
  /** Told when an append claimed a new conversation's lease. */
  onClaim(listener: (conversationId: string) => void): void;
}
