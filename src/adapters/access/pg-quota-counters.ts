import type { Sql } from 'postgres';
import type { Clock } from '../../core/clock.js';
import type { CounterWindow, QuotaCounters } from '../../core/access/quota-counters.js';

const SWEEP_EVERY_MS = 60_000;

/**
 * The limits' counters in PostgreSQL (`agentd_quota_counters`, a row per name and window): each
 * count is one upsert, so the instances sharing the database count in the same rows and hold one
 * limit between them. Rows of windows that are over are deleted now and then.
 */
export class PgQuotaCounters implements QuotaCounters {
  private lastSweep = 0;

  constructor(
    private readonly sql: Sql,
    private readonly clock: Clock,
  ) {}

  async take(window: CounterWindow, max: number): Promise<{ taken: boolean; used: number }> {
    await this.sweep();
    // The row is locked by the upsert: of two instances counting at once, the second sees the first's count.
    const [row] = await this.sql<{ amount: number }[]>`
      INSERT INTO agentd_quota_counters (name, window_start, until_ms, amount) VALUES (${window.name}, ${window.start}, ${window.until}, 1)
      ON CONFLICT (name, window_start) DO UPDATE SET amount = agentd_quota_counters.amount + 1 WHERE agentd_quota_counters.amount < ${max}
      RETURNING amount`;
    if (row) return { taken: true, used: row.amount - 1 };
    return { taken: false, used: await this.read(window) };
  }

  async add(windows: readonly CounterWindow[], amount: number): Promise<void> {
    if (windows.length === 0) return;
    const rows = windows.map((window) => ({ name: window.name, window_start: window.start, until_ms: window.until, amount }));
    await this.sql`
      INSERT INTO agentd_quota_counters ${this.sql(rows, 'name', 'window_start', 'until_ms', 'amount')}
      ON CONFLICT (name, window_start) DO UPDATE SET amount = agentd_quota_counters.amount + EXCLUDED.amount`;
  }

  async read(window: CounterWindow): Promise<number> {
    const [row] = await this.sql<{ amount: number }[]>`SELECT amount FROM agentd_quota_counters WHERE name = ${window.name} AND window_start = ${window.start}`;
    return row?.amount ?? 0;
  }

  private async sweep(): Promise<void> {
    const now = this.clock.now();
    if (now - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = now;
    await this.sql`DELETE FROM agentd_quota_counters WHERE until_ms <= ${now}`;
  }
}
