/**
 * The running instances (`agentd_instances`): each says where it can be reached and renews its
 * heartbeat; a conversation's requests are forwarded to its lease holder's URL while that
 * holder's heartbeat is fresh. The database's clock decides freshness.
 */
import type { Sql } from 'postgres';

export interface InstanceRow {
  id: string;
  url: string;
  /** Milliseconds since its last heartbeat (database clock). */
  silentMs: number;
}

export class PgInstances {
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly sql: Sql,
    readonly id: string,
    readonly url: string,
  ) {}

  /** Registers this instance and renews its heartbeat every `everyMs`. */
  async start(everyMs: number, onError: (error: unknown) => void): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => void this.beat().catch(onError), everyMs);
    this.timer.unref();
  }

  private async beat(): Promise<void> {
    await this.sql`
      INSERT INTO agentd_instances (id, url) VALUES (${this.id}, ${this.url})
      ON CONFLICT (id) DO UPDATE SET url = EXCLUDED.url, heartbeat_at = now()`;
  }

  /** Where an instance said it can be reached and how long it has been silent; null when it has no row (stopped, or declared dead). */
  async lookup(id: string): Promise<InstanceRow | null> {
    const [row] = await this.sql<{ id: string; url: string; silent_ms: number }[]>`
      SELECT id, url, (extract(epoch FROM now() - heartbeat_at) * 1000)::float8 AS silent_ms FROM agentd_instances WHERE id = ${id}`;
    return row ? { id: row.id, url: row.url, silentMs: row.silent_ms } : null;
  }

  /**
   * Whether a newer instance with a fresh heartbeat registered the same address: the old one's
   * process is gone (its port is taken by the new one, started in its place).
   */
  async superseded(id: string, freshMs: number): Promise<boolean> {
    const rows = await this.sql`
      SELECT 1 FROM agentd_instances old JOIN agentd_instances newer ON newer.url = old.url AND newer.id <> old.id
      WHERE old.id = ${id} AND newer.started_at > old.started_at AND newer.heartbeat_at > now() - ${freshMs} * interval '1 millisecond'`;
    return rows.length > 0;
  }

  /** Other instances silent for longer than `silentMs` that still hold a lease: maybe dead. */
  async silentHolders(silentMs: number): Promise<InstanceRow[]> {
    const rows = await this.sql<{ id: string; url: string; silent_ms: number }[]>`
      SELECT i.id, i.url, (extract(epoch FROM now() - i.heartbeat_at) * 1000)::float8 AS silent_ms FROM agentd_instances i
      WHERE i.id <> ${this.id} AND i.heartbeat_at < now() - ${silentMs} * interval '1 millisecond'
        AND EXISTS (SELECT 1 FROM agentd_leases l WHERE l.owner = i.id AND l.expires_at > now())`;
    return rows.map((row) => ({ id: row.id, url: row.url, silentMs: row.silent_ms }));
  }

  /**
   * An instance found dead (silent, and nothing listens at its address): its leases expire now
   * instead of at their term, so whichever instance gets there first takes its conversations
   * over, and its row goes. Were it alive after all, its next heartbeat brings the row back and
   * it keeps every lease nobody took meanwhile; fencing stops it writing to those it lost.
   */
  async declareDead(id: string): Promise<number> {
    return this.sql.begin(async (tx) => {
      const expired = await tx`UPDATE agentd_leases SET expires_at = now() WHERE owner = ${id} AND expires_at > now() RETURNING 1`;
      await tx`DELETE FROM agentd_instances WHERE id = ${id}`;
      return expired.length;
    });
  }

  /** Rows of instances gone silent long ago holding nothing (processes that died and whose leases were all taken). */
  async forget(silentMs: number): Promise<void> {
    await this.sql`
      DELETE FROM agentd_instances i WHERE i.heartbeat_at < now() - ${silentMs} * interval '1 millisecond'
        AND NOT EXISTS (SELECT 1 FROM agentd_leases l WHERE l.owner = i.id AND l.expires_at > now())`;
  }

  /** Instances with a fresh heartbeat (for /metrics). */
  async live(freshMs: number): Promise<number> {
    const [row] = await this.sql<{ n: string }[]>`SELECT count(*) AS n FROM agentd_instances WHERE heartbeat_at > now() - ${freshMs} * interval '1 millisecond'`;
    return Number(row!.n);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.sql`DELETE FROM agentd_instances WHERE id = ${this.id}`.catch(() => {});
  }
}
