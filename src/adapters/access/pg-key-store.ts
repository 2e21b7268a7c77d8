import type { Sql } from 'postgres';
import { KeyRecord } from '../../core/access/api-key.js';
import type { KeyStore } from '../../core/access/key-store.js';

/** The keys in PostgreSQL (`agentd_api_keys`), read at each use: every instance sees a rotation or a removal at once. */
export class PgKeyStore implements KeyStore {
  constructor(private readonly sql: Sql) {}

  async list(): Promise<KeyRecord[]> {
    const rows = await this.sql<{ body: string }[]>`SELECT body FROM agentd_api_keys ORDER BY id`;
    return rows.map((row) => KeyRecord.parse(JSON.parse(row.body)));
  }

  async get(id: string): Promise<KeyRecord | undefined> {
    const [row] = await this.sql<{ body: string }[]>`SELECT body FROM agentd_api_keys WHERE id = ${id}`;
    return row && KeyRecord.parse(JSON.parse(row.body));
  }

  async findByHash(hash: string): Promise<KeyRecord | undefined> {
    const [row] = await this.sql<{ body: string }[]>`SELECT body FROM agentd_api_keys WHERE secret_hash = ${hash} OR previous_hash = ${hash} LIMIT 1`;
    return row && KeyRecord.parse(JSON.parse(row.body));
  }

  async put(record: KeyRecord): Promise<void> {
    await this.sql`
      INSERT INTO agentd_api_keys (id, secret_hash, previous_hash, body) VALUES (${record.id}, ${record.secret_hash}, ${record.previous_hash}, ${JSON.stringify(record)})
      ON CONFLICT (id) DO UPDATE SET secret_hash = EXCLUDED.secret_hash, previous_hash = EXCLUDED.previous_hash, body = EXCLUDED.body`;
  }

  async remove(id: string): Promise<boolean> {
    const rows = await this.sql`DELETE FROM agentd_api_keys WHERE id = ${id} RETURNING id`;
    return rows.length > 0;
  }
}
