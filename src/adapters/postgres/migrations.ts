/**
 * The PostgreSQL schema, as numbered migrations applied in order at start-up. Each runs in its
 * own transaction; the runner holds an advisory lock meanwhile, so instances starting together
 * apply each migration exactly once. A migration is never edited once released: add a new one.
 */
import type { Sql } from 'postgres';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'event log and leases',
    sql: `
      -- Per conversation: the last seq handed out and the newest timestamp (ms), so that seqs run
      -- 1, 2, 3… with no gap and timestamps never go backwards, whichever instance appends.
      CREATE TABLE agentd_log_heads (
        conversation_id uuid PRIMARY KEY,
        last_seq bigint NOT NULL,
        last_ts_ms bigint NOT NULL
      );
      -- The firehose position: one row, updated inside every append's transaction, so positions
      -- are handed out in commit order with no gap (a rolled back append gives its number back).
      CREATE TABLE agentd_firehose_head (
        id smallint PRIMARY KEY CHECK (id = 1),
        head bigint NOT NULL
      );
      INSERT INTO agentd_firehose_head (id, head) VALUES (1, 0);
      CREATE TABLE agentd_events (
        conversation_id uuid NOT NULL,
        seq bigint NOT NULL,
        global_cursor bigint NOT NULL,
        id uuid NOT NULL,
        kind text NOT NULL,
        source text NOT NULL,
        ts_ms bigint NOT NULL,
        body text NOT NULL,
        PRIMARY KEY (conversation_id, seq)
      );
      CREATE UNIQUE INDEX agentd_events_global ON agentd_events (global_cursor);
      CREATE UNIQUE INDEX agentd_events_id ON agentd_events (conversation_id, id);
      CREATE INDEX agentd_events_kind ON agentd_events (conversation_id, kind, seq);
      -- Who runs a conversation: a lease with a fencing token that grows with every new holder.
      CREATE TABLE agentd_leases (
        conversation_id uuid PRIMARY KEY,
        owner text NOT NULL,
        token bigint NOT NULL,
        expires_at timestamptz NOT NULL
      );
    `,
  },
  {
    version: 2,
    name: 'conversations, runs, webhooks, instances',
    sql: `
      -- A conversation record as JSON, its secrets sealed with the server's secret key.
      CREATE TABLE agentd_conversations (
        id uuid PRIMARY KEY,
        body text NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
      );
      -- The newest saved state of each run; ordinal keeps a conversation's runs oldest first.
      CREATE TABLE agentd_runs (
        conversation_id uuid NOT NULL,
        id uuid NOT NULL,
        ordinal bigserial NOT NULL,
        body text NOT NULL,
        PRIMARY KEY (conversation_id, id)
      );
      -- A webhook subscription with its cursor and attempt in progress (secret sealed).
      CREATE TABLE agentd_webhooks (
        id uuid PRIMARY KEY,
        conversation_id uuid NOT NULL,
        body text NOT NULL
      );
      CREATE INDEX agentd_webhooks_conversation ON agentd_webhooks (conversation_id);
      -- The delivery log of a subscription: one row per delivered event, bounded by trimming.
      CREATE TABLE agentd_webhook_deliveries (
        subscription_id uuid NOT NULL,
        seq bigint NOT NULL,
        body text NOT NULL,
        PRIMARY KEY (subscription_id, seq)
      );
      -- The running instances: where each can be reached and when it last said it was alive.
      CREATE TABLE agentd_instances (
        id text PRIMARY KEY,
        url text NOT NULL,
        started_at timestamptz NOT NULL DEFAULT now(),
        heartbeat_at timestamptz NOT NULL DEFAULT now()
      );
    `,
  },
  {
    version: 3,
    name: 'cluster id',
    sql: `
      -- This database's identity: the NATS subjects and stream of its event feed are named after
      -- it, so clusters (or a database created again) sharing one NATS server never mix notices.
      CREATE TABLE agentd_cluster (
        singleton smallint PRIMARY KEY CHECK (singleton = 1),
        id uuid NOT NULL
      );
      INSERT INTO agentd_cluster (singleton, id) VALUES (1, gen_random_uuid());
    `,
  },
  {
    version: 4,
    name: 'schedules and their fires',
    sql: `
      -- A schedule as JSON, with what the due query reads beside it. A tick leases the row
      -- (lease_owner, lease_until) so one instance at a time works on it; rev grows with every
      -- change so that a tick's save never overwrites a change made through the API meanwhile.
      CREATE TABLE agentd_schedules (
        id uuid PRIMARY KEY,
        conversation_id uuid,
        status text NOT NULL,
        next_fire_ms bigint,
        rev bigint NOT NULL DEFAULT 1,
        lease_owner text,
        lease_until timestamptz,
        body text NOT NULL
      );
      CREATE INDEX agentd_schedules_due ON agentd_schedules (next_fire_ms) WHERE status = 'active';
      -- One row per slot, keyed by the fire id derived from schedule and slot: inserting it is
      -- the claim, so a slot fires at most once whichever instance gets there first. A fire
      -- claimed and not settled (outcome null) past its lease is finished by another instance.
      CREATE TABLE agentd_schedule_fires (
        id uuid PRIMARY KEY,
        schedule_id uuid NOT NULL,
        scheduled_ms bigint NOT NULL,
        outcome text,
        claimed_by text,
        lease_until timestamptz,
        body text NOT NULL
      );
      CREATE INDEX agentd_schedule_fires_list ON agentd_schedule_fires (schedule_id, scheduled_ms DESC, id DESC);
      CREATE INDEX agentd_schedule_fires_unsettled ON agentd_schedule_fires (lease_until) WHERE outcome IS NULL;
    `,
  },
  {
    version: 5,
    name: 'api keys and audit log',
    sql: `
      -- API keys: the record as JSON (never a secret: only the hashes of the current and the
      -- previous secret, each indexed so that a request's key is found in one lookup).
      CREATE TABLE agentd_api_keys (
        id uuid PRIMARY KEY,
        secret_hash text NOT NULL UNIQUE,
        previous_hash text,
        body text NOT NULL
      );
      CREATE INDEX agentd_api_keys_previous ON agentd_api_keys (previous_hash) WHERE previous_hash IS NOT NULL;
      -- The audit log: appended to, never updated; seq orders it and is the pages' cursor.
      CREATE TABLE agentd_audit (
        seq bigserial PRIMARY KEY,
        owner text,
        key_id text,
        body text NOT NULL
      );
      CREATE INDEX agentd_audit_owner ON agentd_audit (owner, seq);
    `,
  },
  {
    version: 6,
    name: 'quota counters',
    sql: `
      -- The limits' counters, shared by every instance: a key's requests in a minute, an owner's
      -- spend in a day, a month or all time (window_start 0). until_ms: when the row may go.
      CREATE TABLE agentd_quota_counters (
        name text NOT NULL,
        window_start bigint NOT NULL,
        until_ms bigint,
        amount double precision NOT NULL,
        PRIMARY KEY (name, window_start)
      );
      CREATE INDEX agentd_quota_counters_until ON agentd_quota_counters (until_ms) WHERE until_ms IS NOT NULL;
    `,
  },
];

/** The id migration 3 gave this database (see agentd_cluster). */
export async function clusterId(sql: Sql): Promise<string> {
  const [row] = await sql<{ id: string }[]>`SELECT id FROM agentd_cluster`;
  return row!.id;
}

/** A fixed advisory lock key for the migration runner ('agentd' in ASCII). */
const MIGRATION_LOCK_KEY = 0x6167656e7464;

/** Applies every migration not yet applied; returns the versions it applied. */
export async function migrate(sql: Sql, migrations: readonly Migration[] = MIGRATIONS): Promise<number[]> {
  const connection = await sql.reserve();
  try {
    await connection`SELECT pg_advisory_lock(${MIGRATION_LOCK_KEY})`;
    try {
      await connection`
        CREATE TABLE IF NOT EXISTS agentd_schema_migrations (
          version integer PRIMARY KEY,
          name text NOT NULL,
          applied_at timestamptz NOT NULL DEFAULT now()
        )`;
      const rows = await connection<{ version: number }[]>`SELECT version FROM agentd_schema_migrations`;
      const done = new Set(rows.map((row) => row.version));
      const applied: number[] = [];
      for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
        if (done.has(migration.version)) continue;
        await connection.unsafe('BEGIN');
        try {
          await connection.unsafe(migration.sql);
          await connection`INSERT INTO agentd_schema_migrations (version, name) VALUES (${migration.version}, ${migration.name})`;
          await connection.unsafe('COMMIT');
        } catch (error) {
          await connection.unsafe('ROLLBACK');
          throw new Error(`migration ${migration.version} (${migration.name}) failed: ${(error as Error).message}`, { cause: error });
        }
        applied.push(migration.version);
      }
      return applied;
    } finally {
      await connection`SELECT pg_advisory_unlock(${MIGRATION_LOCK_KEY})`;
    }
  } finally {
    connection.release();
  }
}
