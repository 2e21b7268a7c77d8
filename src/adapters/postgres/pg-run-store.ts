/**
 * Run records in PostgreSQL (`agentd_runs`): the newest state of each run, a conversation's runs
 * oldest first. Every run is read once at start-up (`preload`) and kept in memory, as the file
 * store caches them; `reload` reads one conversation's runs again when this instance takes it
 * over from another. Writes go through the WritePipeline (ordered, durable before a response).
 */
import type { Sql } from 'postgres';
import type { Run, RunStore } from '../../core/agent/run-record.js';
import type { WritePipeline } from './write-pipeline.js';

export class PgRunStore implements RunStore {
  private readonly cache = new Map<string, Map<string, Run>>();

  constructor(
    private readonly sql: Sql,
    private readonly writes: WritePipeline,
    /** This instance: runs of a conversation another live instance holds are not written from here. */
    private readonly instanceId: string,
  ) {}

  async preload(): Promise<void> {
    this.cache.clear();
    const rows = await this.sql<{ body: string }[]>`SELECT body FROM agentd_runs ORDER BY ordinal`;
    for (const row of rows) this.put(JSON.parse(row.body) as Run);
  }

  async reload(conversationId: string): Promise<Run[]> {
    const rows = await this.sql<{ body: string }[]>`SELECT body FROM agentd_runs WHERE conversation_id = ${conversationId} ORDER BY ordinal`;
    this.cache.delete(conversationId);
    for (const row of rows) this.put(JSON.parse(row.body) as Run);
    return this.list(conversationId);
  }

  save(run: Run): void {
    this.put({ ...run });
    const body = JSON.stringify(run);
    this.writes.run(`runs:${run.conversation_id}`, () => this.sql`
      INSERT INTO agentd_runs (conversation_id, id, body) VALUES (${run.conversation_id}, ${run.id}, ${body})
      ON CONFLICT (conversation_id, id) DO UPDATE SET body = EXCLUDED.body
      WHERE NOT EXISTS (SELECT 1 FROM agentd_leases WHERE conversation_id = ${run.conversation_id} AND expires_at > now() AND owner <> ${this.instanceId})`);
  }

  list(conversationId: string): Run[] {
    return [...(this.cache.get(conversationId)?.values() ?? [])];
  }

  drop(conversationId: string): void {
    this.cache.delete(conversationId);
    this.writes.run(`runs:${conversationId}`, () => this.sql`DELETE FROM agentd_runs WHERE conversation_id = ${conversationId}`);
  }

  private put(run: Run): void {
    let runs = this.cache.get(run.conversation_id);
    if (!runs) {
      runs = new Map();
      this.cache.set(run.conversation_id, runs);
    }
    runs.set(run.id, run);
  }
}
