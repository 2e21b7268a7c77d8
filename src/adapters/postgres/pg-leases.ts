/**
 * Conversation leases in PostgreSQL: one instance at a time runs a conversation. A lease is
 * (owner, token, expires_at); the token grows by one each time the lease changes hands, and
 * every append made under a lease carries it (PgEventStore's fence), so an instance that lost
 * its lease — paused by a long GC, cut off from the network, presumed dead — can write nothing.
 * The database's clock decides expiry, so instances' clocks need not agree.
 */
import type { Sql } from 'postgres';

export interface Lease {
  conversationId: string;
  owner: string;
  token: number;
  expiresAt: Date;
}

interface LeaseRow {
  conversation_id: string;
  owner: string;
  token: string;
  expires_at: Date;
}

export class PgLeases {
  constructor(private readonly sql: Sql) {}

  /**
   * Takes the lease when it is free, expired or already ours (then only renewed, same token).
   * Returns the lease held now, by us or by another owner.
   */
  async acquire(conversationId: string, owner: string, ttlMs: number): Promise<{ acquired: boolean; lease: Lease }> {
    const [row] = await this.sql<LeaseRow[]>`
      INSERT INTO agentd_leases (conversation_id, owner, token, expires_at)
      VALUES (${conversationId}, ${owner}, 1, now() + ${ttlMs} * interval '1 millisecond')
      ON CONFLICT (conversation_id) DO UPDATE
        SET owner = EXCLUDED.owner,
            token = CASE WHEN agentd_leases.owner = EXCLUDED.owner AND agentd_leases.expires_at > now() THEN agentd_leases.token ELSE agentd_leases.token + 1 END,
            expires_at = EXCLUDED.expires_at
        WHERE agentd_leases.owner = EXCLUDED.owner OR agentd_leases.expires_at <= now()
      RETURNING conversation_id, owner, token, expires_at`;
    if (row) return { acquired: true, lease: toLease(row) };
    const current = await this.current(conversationId);
    if (!current) return this.acquire(conversationId, owner, ttlMs); // released meanwhile
    return { acquired: false, lease: current };
  }

  /** Extends a lease we hold with this token; false when it was lost (expired and taken, or released). */
  async renew(lease: Pick<Lease, 'conversationId' | 'owner' | 'token'>, ttlMs: number): Promise<boolean> {
    const rows = await this.sql`
      UPDATE agentd_leases SET expires_at = now() + ${ttlMs} * interval '1 millisecond'
      WHERE conversation_id = ${lease.conversationId} AND owner = ${lease.owner} AND token = ${lease.token}
      RETURNING 1`;
    return rows.length === 1;
  }

  /** Gives a lease up; it keeps its token so the next holder's is larger. */
  async release(lease: Pick<Lease, 'conversationId' | 'owner' | 'token'>): Promise<void> {
    await this.sql`
      UPDATE agentd_leases SET expires_at = now() - interval '1 millisecond'
      WHERE conversation_id = ${lease.conversationId} AND owner = ${lease.owner} AND token = ${lease.token}`;
  }

  async current(conversationId: string): Promise<Lease | null> {
    const [row] = await this.sql<LeaseRow[]>`SELECT conversation_id, owner, token, expires_at FROM agentd_leases WHERE conversation_id = ${conversationId}`;
    return row ? toLease(row) : null;
  }

  /** A lease for a conversation nobody ever held (a new one); null when it has a lease row already. */
  async claimNew(conversationId: string, owner: string, ttlMs: number): Promise<Lease | null> {
    const [row] = await this.sql<LeaseRow[]>`
      INSERT INTO agentd_leases (conversation_id, owner, token, expires_at)
      VALUES (${conversationId}, ${owner}, 1, now() + ${ttlMs} * interval '1 millisecond')
      ON CONFLICT (conversation_id) DO NOTHING
      RETURNING conversation_id, owner, token, expires_at`;
    return row ? toLease(row) : null;
  }

  /** Extends every lease `owner` still holds among `conversationIds`; returns those renewed. */
  async renewAll(owner: string, conversationIds: readonly string[], ttlMs: number): Promise<Set<string>> {
    if (conversationIds.length === 0) return new Set();
    const rows = await this.sql<{ conversation_id: string }[]>`
      UPDATE agentd_leases SET expires_at = now() + ${ttlMs} * interval '1 millisecond'
      WHERE owner = ${owner} AND conversation_id IN ${this.sql(conversationIds as string[])}
      RETURNING conversation_id`;
    return new Set(rows.map((row) => row.conversation_id));
  }

  /**
   * Expired leases of stored conversations (their holder died), those stored as running first.
   * The body is matched as text, not cast to jsonb: one damaged row must not stop every failover.
   */
  async orphaned(limit: number): Promise<string[]> {
    const rows = await this.sql<{ conversation_id: string }[]>`
      SELECT l.conversation_id FROM agentd_leases l JOIN agentd_conversations c ON c.id = l.conversation_id
      WHERE l.expires_at <= now()
      ORDER BY c.body LIKE '%"status":"running"%' DESC, l.expires_at LIMIT ${limit}`;
    return rows.map((row) => row.conversation_id);
  }

  /** Leases whose holder stopped renewing them: candidates for takeover. */
  async expired(limit: number): Promise<Lease[]> {
    const rows = await this.sql<LeaseRow[]>`
      SELECT conversation_id, owner, token, expires_at FROM agentd_leases WHERE expires_at <= now() ORDER BY expires_at LIMIT ${limit}`;
    return rows.map(toLease);
  }
}

function toLease(row: LeaseRow): Lease {
  return { conversationId: row.conversation_id, owner: row.owner, token: Number(row.token), expiresAt: row.expires_at };
}
