/**
 * The running instances (`agentd_instances`): each says where it can be reached and renews its
 * heartbeat; a conversation's requests are forwarded to its lease holder's URL while that
 * holder's heartbeat is fresh. The database's clock decides freshness.
 */
import type { Sql } from 'postgres';

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

  /** The URL of an instance whose heartbeat is younger than `freshMs`; null when it is gone or silent. */
  async urlOf(id: string, freshMs: number): Promise<string | null> {
    const [row] = await this.sql<{ url: string }[]>`
      SELECT url FROM agentd_instances WHERE id = ${id} AND heartbeat_at > now() - ${freshMs} * interval '1 millisecond'`;
    return row?.url ?? null;
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
