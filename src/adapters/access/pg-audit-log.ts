import { randomUUID } from 'node:crypto';
import type { Sql } from 'postgres';
import { AuditEntry, type AuditLog, type AuditQuery, type NewAuditEntry } from '../../core/access/audit-log.js';
import type { Page } from '../../core/pagination.js';

/** The audit log in PostgreSQL (`agentd_audit`): rows are inserted, never updated; every instance appends to it. */
export class PgAuditLog implements AuditLog {
  constructor(private readonly sql: Sql) {}

  async append(entry: NewAuditEntry): Promise<void> {
    // The seq is the row's own (bigserial), taken first so that the body carries it too.
    const [row] = await this.sql<{ seq: string }[]>`SELECT nextval(pg_get_serial_sequence('agentd_audit', 'seq')) AS seq`;
    const seq = Number(row!.seq);
    await this.sql`INSERT INTO agentd_audit (seq, owner, key_id, body) VALUES (${seq}, ${entry.owner}, ${entry.key_id}, ${JSON.stringify({ id: randomUUID(), seq, ...entry })})`;
  }

  async page(query: AuditQuery): Promise<Page<AuditEntry>> {
    const owner = query.owner ?? null;
    const keyId = query.keyId ?? null;
    const rows = await this.sql<{ body: string }[]>`
      SELECT body FROM agentd_audit
      WHERE seq > ${query.afterSeq} AND (${owner}::text IS NULL OR owner = ${owner}) AND (${keyId}::text IS NULL OR key_id = ${keyId})
      ORDER BY seq LIMIT ${query.limit + 1}`;
    const items = rows.slice(0, query.limit).map((row) => AuditEntry.parse(JSON.parse(row.body)));
    return { items, next_page_id: rows.length > query.limit ? String(items[items.length - 1]!.seq) : null };
  }
}
