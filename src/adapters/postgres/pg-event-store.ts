/**
 * The event log's storage in PostgreSQL: the same guarantees as the file log, with the database
 * deciding order when several instances append.
 * - Per-conversation `seq` 1, 2, 3… with no gap: each append takes the conversation's head row
 *   (`agentd_log_heads`) in its transaction, so two instances appending to one conversation
 *   queue on that row.
 * - A server-wide firehose position in commit order with no gap (`agentd_firehose_head`).
 * - Fencing: an append made under a lease checks, in the same transaction, that the lease is
 *   still held with that token (`FOR SHARE`, so a takeover waits for the append to commit, and
 *   an append after a takeover fails with LeaseLostError).
 * - Pages cost O(limit) through the (conversation_id, seq) and (conversation_id, kind, seq) indexes.
 * Events are stored as the exact JSON text they were first written as.
 */
import { randomUUID } from 'node:crypto';
import type { Sql, TransactionSql } from 'postgres';
import { isoTimestamp, systemClock, type Clock } from '../../core/clock.js';
import { AppError } from '../../core/errors.js';
import type { AgentEvent, NewEvent } from '../../core/schemas/event.js';
import type { AppendedEvent, EventFilter, EventPageQuery, FirehoseEntry, StoredEvent } from '../../core/events/event-log.js';

/** The lease an append is made under: refused once another instance holds the conversation. */
export interface Fence {
  owner: string;
  token: number;
}

export class LeaseLostError extends AppError {
  constructor(readonly conversationId: string) {
    super({ code: 'lease_lost', kind: 'unavailable', message: `This instance no longer holds the lease of conversation ${conversationId}: another instance runs it now. Retry the request.`, details: { id: conversationId } });
  }
}

interface EventRow {
  body: string;
}

export class PgEventStore {
  private readonly clock: Clock;

  constructor(
    private readonly sql: Sql,
    options: { clock?: Clock } = {},
  ) {
    this.clock = options.clock ?? systemClock;
  }

  async append(conversationId: string, input: NewEvent, fence?: Fence): Promise<AppendedEvent> {
    return this.sql.begin(async (tx) => {
      if (fence) await this.checkFence(tx, conversationId, fence);
      const now = this.clock.now();
      const [head] = await tx<{ last_seq: string; last_ts_ms: string }[]>`
        INSERT INTO agentd_log_heads (conversation_id, last_seq, last_ts_ms) VALUES (${conversationId}, 1, ${now})
        ON CONFLICT (conversation_id) DO UPDATE
          SET last_seq = agentd_log_heads.last_seq + 1, last_ts_ms = GREATEST(agentd_log_heads.last_ts_ms, EXCLUDED.last_ts_ms)
        RETURNING last_seq, last_ts_ms`;
      const [firehose] = await tx<{ head: string }[]>`UPDATE agentd_firehose_head SET head = head + 1 WHERE id = 1 RETURNING head`;
      const seq = Number(head!.last_seq);
      const tsMs = Number(head!.last_ts_ms);
      const event = { id: randomUUID(), seq, conversation_id: conversationId, timestamp: isoTimestamp(tsMs), ...input } as AgentEvent;
      const json = JSON.stringify(event);
      const globalCursor = Number(firehose!.head);
      await tx`
        INSERT INTO agentd_events (conversation_id, seq, global_cursor, id, kind, source, ts_ms, body)
        VALUES (${conversationId}, ${seq}, ${globalCursor}, ${event.id}, ${event.kind}, ${event.source}, ${tsMs}, ${json})`;
      return { event, json, globalCursor };
    });
  }

  async read(conversationId: string, query: EventPageQuery): Promise<StoredEvent[]> {
    const sql = this.sql;
    const after = query.order === 'asc' ? Math.max(query.afterSeq ?? 0, query.cursorSeq ?? 0) : (query.afterSeq ?? 0);
    const before = query.order === 'desc' && query.cursorSeq !== undefined ? query.cursorSeq : null;
    const rows = await sql<EventRow[]>`
      SELECT body FROM agentd_events
      WHERE conversation_id = ${conversationId} AND seq > ${after}
        ${before !== null ? sql`AND seq < ${before}` : sql``}
        ${this.filterSql(query)}
      ORDER BY seq ${query.order === 'asc' ? sql`ASC` : sql`DESC`}
      LIMIT ${query.limit}`;
    return rows.map(parseRow);
  }

  async count(conversationId: string, filter: EventFilter): Promise<number> {
    const sql = this.sql;
    if (!filter.kinds?.length && !filter.sources?.length && filter.sinceMs === undefined) {
      return Math.max(0, (await this.lastSeq(conversationId)) - (filter.afterSeq ?? 0));
    }
    const [row] = await sql<{ n: string }[]>`
      SELECT count(*) AS n FROM agentd_events
      WHERE conversation_id = ${conversationId} AND seq > ${filter.afterSeq ?? 0} ${this.filterSql(filter)}`;
    return Number(row!.n);
  }

  async findById(conversationId: string, eventId: string): Promise<StoredEvent | undefined> {
    if (!UUID.test(eventId)) return undefined;
    const [row] = await this.sql<EventRow[]>`SELECT body FROM agentd_events WHERE conversation_id = ${conversationId} AND id = ${eventId}`;
    return row ? parseRow(row) : undefined;
  }

  async lastSeq(conversationId: string): Promise<number> {
    const [row] = await this.sql<{ last_seq: string }[]>`SELECT last_seq FROM agentd_log_heads WHERE conversation_id = ${conversationId}`;
    return row ? Number(row.last_seq) : 0;
  }

  /** Events of every conversation in commit order, after a firehose position. */
  async readGlobal(afterCursor: number, limit: number): Promise<FirehoseEntry[]> {
    const rows = await this.sql<(EventRow & { global_cursor: string })[]>`
      SELECT global_cursor, body FROM agentd_events WHERE global_cursor > ${afterCursor} ORDER BY global_cursor LIMIT ${limit}`;
    return rows.map((row) => ({ globalCursor: Number(row.global_cursor), stored: parseRow(row) }));
  }

  async globalHead(): Promise<number> {
    const [row] = await this.sql<{ head: string }[]>`SELECT head FROM agentd_firehose_head WHERE id = 1`;
    return Number(row!.head);
  }

  /** Removes a conversation's events for good. */
  async drop(conversationId: string): Promise<void> {
    await this.sql.begin(async (tx) => {
      await tx`DELETE FROM agentd_events WHERE conversation_id = ${conversationId}`;
      await tx`DELETE FROM agentd_log_heads WHERE conversation_id = ${conversationId}`;
    });
  }

  private async checkFence(tx: TransactionSql, conversationId: string, fence: Fence): Promise<void> {
    const [lease] = await tx<{ owner: string; token: string }[]>`
      SELECT owner, token FROM agentd_leases WHERE conversation_id = ${conversationId} FOR SHARE`;
    if (!lease || lease.owner !== fence.owner || Number(lease.token) !== fence.token) throw new LeaseLostError(conversationId);
  }

  private filterSql(filter: EventFilter) {
    const sql = this.sql;
    return sql`
      ${filter.kinds?.length ? sql`AND kind IN ${sql([...filter.kinds])}` : sql``}
      ${filter.sources?.length ? sql`AND source IN ${sql([...filter.sources])}` : sql``}
      ${filter.sinceMs !== undefined ? sql`AND ts_ms >= ${filter.sinceMs}` : sql``}`;
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function parseRow(row: EventRow): StoredEvent {
  return { event: JSON.parse(row.body) as AgentEvent, json: row.body };
}
