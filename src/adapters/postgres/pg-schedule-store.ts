/**
 * Schedules and fires in PostgreSQL (`agentd_schedules`, `agentd_schedule_fires`), read from the
 * database at each use: every instance ticks, and the rows say who works on what. A due schedule
 * is leased with FOR UPDATE SKIP LOCKED (instances never wait on each other); a fire is claimed
 * by inserting its row, whose key is derived from schedule and slot. Every write of a schedule
 * sends a notice on `agentd_schedules`, which wakes each instance's timer to read again when the
 * next fire is due (the notice carries nothing: a forged one only costs a read).
 */
import type { Sql } from 'postgres';
import type { Damage } from '../../core/errors.js';
import type { ScheduleFire } from '../../core/schedules/schedule-schemas.js';
import type { ScheduleRecord, ScheduleStore, StoredFire } from '../../core/schedules/schedule-store.js';

const CHANNEL = 'agentd_schedules';

interface ScheduleRow {
  body: string;
  rev: string;
}

interface FireRow {
  body: string;
  claimed_by: string | null;
  lease_until: Date | null;
}

export class PgScheduleStore implements ScheduleStore {
  constructor(
    private readonly sql: Sql,
    private readonly options: { leaseMs: number },
  ) {}

  async get(id: string): Promise<ScheduleRecord | null> {
    const [row] = await this.sql<ScheduleRow[]>`SELECT body, rev FROM agentd_schedules WHERE id = ${id}`;
    return row ? parseRecord(row) : null;
  }

  async list(query: Parameters<ScheduleStore['list']>[0]): Promise<ScheduleRecord[]> {
    const rows = await this.sql<ScheduleRow[]>`
      SELECT body, rev FROM agentd_schedules
      WHERE (${query.afterId ?? null}::uuid IS NULL OR id > ${query.afterId ?? null}::uuid)
        AND (${query.conversationId ?? null}::uuid IS NULL OR conversation_id = ${query.conversationId ?? null}::uuid)
        AND (${query.status ?? null}::text IS NULL OR status = ${query.status ?? null}::text)
        AND (${query.owner ?? null}::text IS NULL OR (body::jsonb)->'schedule'->>'owner' = ${query.owner ?? null}::text)
      ORDER BY id LIMIT ${query.limit}`;
    return rows.map(parseRecord);
  }

  async save(record: ScheduleRecord): Promise<void> {
    const { schedule } = record;
    await this.sql`
      WITH saved AS (
        INSERT INTO agentd_schedules (id, conversation_id, status, next_fire_ms, body)
        VALUES (${schedule.id}, ${schedule.conversation_id}, ${schedule.status}, ${nextMs(record)}, ${bodyOf(record)})
        ON CONFLICT (id) DO UPDATE SET conversation_id = EXCLUDED.conversation_id, status = EXCLUDED.status, next_fire_ms = EXCLUDED.next_fire_ms, body = EXCLUDED.body, rev = agentd_schedules.rev + 1
        RETURNING id)
      SELECT pg_notify(${CHANNEL}, '') FROM saved`;
  }

  async delete(id: string): Promise<void> {
    await this.sql.begin(async (sql) => {
      await sql`DELETE FROM agentd_schedules WHERE id = ${id}`;
      await sql`DELETE FROM agentd_schedule_fires WHERE schedule_id = ${id}`;
      await sql`SELECT pg_notify(${CHANNEL}, '')`;
    });
  }

  async takeDue(options: Parameters<ScheduleStore['takeDue']>[0]): Promise<ScheduleRecord[]> {
    const rows = await this.sql<ScheduleRow[]>`
      UPDATE agentd_schedules SET lease_owner = ${options.owner}, lease_until = now() + ${options.leaseMs} * interval '1 millisecond'
      WHERE id IN (
        SELECT id FROM agentd_schedules
        WHERE status = 'active' AND next_fire_ms <= ${options.now} AND (lease_until IS NULL OR lease_until < now())
        ORDER BY next_fire_ms LIMIT ${options.limit}
        FOR UPDATE SKIP LOCKED)
      RETURNING body, rev`;
    return rows.map(parseRecord);
  }

  async release(record: ScheduleRecord, owner: string): Promise<void> {
    const { schedule } = record;
    // Changed through the API since it was taken: that change stands (the fires made meanwhile are stored; the next tick sees them).
    const [saved] = await this.sql`
      WITH saved AS (
        UPDATE agentd_schedules SET status = ${schedule.status}, next_fire_ms = ${nextMs(record)}, body = ${bodyOf(record)}, rev = rev + 1, lease_owner = NULL, lease_until = NULL
        WHERE id = ${schedule.id} AND lease_owner = ${owner} AND rev = ${record.rev ?? 0}
        RETURNING id)
      SELECT id, pg_notify(${CHANNEL}, '') FROM saved`;
    if (!saved) await this.sql`UPDATE agentd_schedules SET lease_owner = NULL, lease_until = NULL WHERE id = ${schedule.id} AND lease_owner = ${owner}`;
  }

  async claimFire(stored: StoredFire): Promise<boolean> {
    const { fire } = stored;
    const rows = await this.sql`
      INSERT INTO agentd_schedule_fires (id, schedule_id, scheduled_ms, outcome, claimed_by, lease_until, body)
      VALUES (${fire.id}, ${fire.schedule_id}, ${Date.parse(fire.scheduled_for)}, ${fire.outcome}, ${stored.claimedBy},
        ${stored.claimedBy === null ? null : this.sql`now() + ${this.options.leaseMs} * interval '1 millisecond'`}, ${JSON.stringify(fire)})
      ON CONFLICT (id) DO NOTHING RETURNING id`;
    return rows.length > 0;
  }

  async settleFire(fire: ScheduleFire): Promise<void> {
    await this.sql`UPDATE agentd_schedule_fires SET outcome = ${fire.outcome}, claimed_by = NULL, lease_until = NULL, body = ${JSON.stringify(fire)} WHERE id = ${fire.id}`;
  }

  async fires(scheduleId: string, options: Parameters<ScheduleStore['fires']>[1]): Promise<ScheduleFire[]> {
    const before = options.before;
    const rows = before
      ? await this.sql<{ body: string }[]>`
          SELECT body FROM agentd_schedule_fires WHERE schedule_id = ${scheduleId} AND (scheduled_ms, id) < (${Date.parse(before.scheduledFor)}, ${before.id}::uuid)
          ORDER BY scheduled_ms DESC, id DESC LIMIT ${options.limit}`
      : await this.sql<{ body: string }[]>`SELECT body FROM agentd_schedule_fires WHERE schedule_id = ${scheduleId} ORDER BY scheduled_ms DESC, id DESC LIMIT ${options.limit}`;
    return rows.map((row) => JSON.parse(row.body) as ScheduleFire);
  }

  /** Takes the fires over (a lease of this instance's own) so that one instance finishes each. */
  async unsettled(options: { owner: string }): Promise<StoredFire[]> {
    const rows = await this.sql<FireRow[]>`
      UPDATE agentd_schedule_fires SET claimed_by = ${options.owner}, lease_until = now() + ${this.options.leaseMs} * interval '1 millisecond'
      WHERE id IN (
        SELECT id FROM agentd_schedule_fires WHERE outcome IS NULL AND lease_until < now() LIMIT 100 FOR UPDATE SKIP LOCKED)
      RETURNING body, claimed_by, lease_until`;
    return rows.map((row) => ({ fire: JSON.parse(row.body) as ScheduleFire, claimedBy: row.claimed_by, leaseUntil: row.lease_until?.getTime() ?? null }));
  }

  /** A due schedule is due in the clock's time; a claim's lease in the database's (the same wall clock, in production). */
  async nextWake(): Promise<number | null> {
    const [row] = await this.sql<{ at: string | null }[]>`
      SELECT LEAST(
        (SELECT min(next_fire_ms) FROM agentd_schedules WHERE status = 'active'),
        (SELECT (extract(epoch FROM min(lease_until)) * 1000)::bigint FROM agentd_schedule_fires WHERE outcome IS NULL)) AS at`;
    return row && row.at !== null ? Number(row.at) : null;
  }

  /** Also called when the listening connection is made again: notices sent meanwhile were missed. */
  async watch(listener: () => void): Promise<void> {
    await this.sql.listen(CHANNEL, () => listener(), () => listener());
  }

  /** Rows are written whole in one statement: none is found damaged at start-up. */
  damaged(): { id: string; damage: Damage; path: string }[] {
    return [];
  }
}

function parseRecord(row: ScheduleRow): ScheduleRecord {
  return { ...(JSON.parse(row.body) as ScheduleRecord), rev: Number(row.rev) };
}

function bodyOf(record: ScheduleRecord): string {
  return JSON.stringify({ schedule: record.schedule, state: record.state });
}

function nextMs(record: ScheduleRecord): number | null {
  return record.schedule.next_fire_at === null ? null : Date.parse(record.schedule.next_fire_at);
}
