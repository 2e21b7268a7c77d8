/**
 * Conversation records in PostgreSQL (`agentd_conversations`), sealed exactly as the files are
 * (secret values, the LLM key, auth headers, hook and MCP secrets: SecretBox). `save` and
 * `remove` go through the WritePipeline: ordered per conversation, durable before any HTTP
 * response leaves (see WritePipeline.settled).
 */
import type { Sql } from 'postgres';
import { ConversationRecord, type ConversationRepository, type LoadedConversations } from '../../core/conversations/conversation-record.js';
import { DamagedDataError } from '../../core/errors.js';
import type { SecretBox } from '../../core/secrets/secret-box.js';
import { sealConversationRecord, unsealConversationRecord, type SealedConversationRecord } from '../files/sealed-conversation-record.js';
import type { WritePipeline } from './write-pipeline.js';

const TABLE = 'agentd_conversations';
/** Told the id of each record written or removed, at commit. */
const CHANNEL = 'agentd_records';

export class PgConversationRepository implements ConversationRepository {
  constructor(
    private readonly sql: Sql,
    private readonly box: SecretBox,
    private readonly writes: WritePipeline,
    /** This instance: a record whose lease another live instance holds is not written from here. */
    private readonly instanceId: string,
  ) {}

  async loadAll(): Promise<LoadedConversations> {
    const rows = await this.sql<{ id: string; body: string }[]>`SELECT id, body FROM agentd_conversations ORDER BY id`;
    const loaded: LoadedConversations = { records: [], damaged: [] };
    for (const row of rows) {
      try {
        loaded.records.push(this.parse(row.id, row.body));
      } catch (error) {
        if (!(error instanceof DamagedDataError)) throw error;
        loaded.damaged.push({ id: row.id, error });
      }
    }
    return loaded;
  }

  /** One record as stored now (another instance may have changed it); undefined when gone. */
  async load(id: string): Promise<ConversationRecord | undefined> {
    const [row] = await this.sql<{ body: string }[]>`SELECT body FROM agentd_conversations WHERE id = ${id}`;
    return row ? this.parse(id, row.body) : undefined;
  }

  save(record: ConversationRecord): void {
    // Sealed and serialized now: the record object changes again before the write runs.
    const body = JSON.stringify(sealConversationRecord(record, this.box));
    const { id } = record;
    this.writes.run(`conversation:${id}`, () =>
      this.sql.begin(async (tx) => {
        await tx`
          INSERT INTO agentd_conversations (id, body) VALUES (${id}, ${body})
          ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, updated_at = now()
          WHERE NOT EXISTS (SELECT 1 FROM agentd_leases WHERE conversation_id = ${id} AND expires_at > now() AND owner <> ${this.instanceId})`;
        await tx`SELECT pg_notify(${CHANNEL}, ${id})`;
      }),
    );
  }

  remove(id: string): void {
    this.writes.run(`conversation:${id}`, () =>
      this.sql.begin(async (tx) => {
        await tx`DELETE FROM agentd_conversations WHERE id = ${id}`;
        await tx`DELETE FROM agentd_leases WHERE conversation_id = ${id}`;
        await tx`SELECT pg_notify(${CHANNEL}, ${id})`;
      }),
    );
  }

  /**
   * Calls `listener` with the id of every record another instance (or this one) wrote or
   * removed, and with each mark sent by `mark`: PostgreSQL delivers notifications in commit
   * order, so every change committed before a mark was sent reaches the listener before it.
   */
  async onChange(listener: (payload: string) => void, onRelisten?: () => void): Promise<void> {
    let listening = false;
    // Called again each time the listening connection is made anew: what was sent meanwhile was missed.
    await this.sql.listen(CHANNEL, listener, () => {
      if (listening) onRelisten?.();
      listening = true;
    });
  }

  /** Sends `payload` (not a record id) down the channel `onChange` listens to. */
  async mark(payload: string): Promise<void> {
    await this.sql`SELECT pg_notify(${CHANNEL}, ${payload})`;
  }

  private parse(id: string, body: string): ConversationRecord {
    const damaged = (reason: string) => new DamagedDataError({ file: `${TABLE}/${id}`, line: null, reason }, `${TABLE}/${id}`);
    let stored: SealedConversationRecord;
    try {
      stored = JSON.parse(body) as SealedConversationRecord;
    } catch (error) {
      throw damaged(`not valid JSON (${(error as Error).message})`);
    }
    if (typeof stored !== 'object' || stored === null || stored.id !== id || typeof stored.status !== 'string' || typeof stored.workdir !== 'string') {
      throw damaged('not a conversation record of this row');
    }
    let unsealed: ConversationRecord;
    try {
      unsealed = unsealConversationRecord(stored, this.box);
    } catch {
      throw damaged("its sealed secrets cannot be decrypted with this server's secret key");
    }
    const parsed = ConversationRecord.safeParse(unsealed);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw damaged(`not a valid conversation record (${issue.path.join('.') || 'record'}: ${issue.message})`);
    }
    return parsed.data;
  }
}
