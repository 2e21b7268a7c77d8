/**
 * Webhook subscriptions and their delivery logs in PostgreSQL (`agentd_webhooks`,
 * `agentd_webhook_deliveries`), the secret sealed with the SecretBox as in the files. Read once
 * at start-up (`preload`: states, and the newest `historyLimit` deliveries of each), then kept in
 * memory; writes go through the WritePipeline (ordered per subscription, durable before a response).
 */
import type { Sql } from 'postgres';
import { DamagedDataError, type Damage } from '../../core/errors.js';
import type { SecretBox } from '../../core/secrets/secret-box.js';
import { SubscriptionState, type DeliveryRecord, type WebhookStore } from '../../core/webhooks/subscription-state.js';
import type { WritePipeline } from './write-pipeline.js';

interface PendingWrite {
  conversationId: string | null;
  /** The sealed state as JSON, when it changed. */
  body: string | null;
  deliveries: string[];
  seqs: number[];
  trimBelow: number | null;
  removed: boolean;
}

export class PgWebhookStore implements WebhookStore {
  private states: SubscriptionState[] = [];
  private readonly deliveries = new Map<string, DeliveryRecord[]>();
  private readonly quarantined = new Map<string, DamagedDataError>();
  private readonly historyLimit: number;
  /** Per subscription: the write queued and not yet started (later changes join it). */
  private readonly pending = new Map<string, PendingWrite>();

  constructor(
    private readonly sql: Sql,
    private readonly box: SecretBox,
    private readonly writes: WritePipeline,
    options: { historyLimit?: number } = {},
  ) {
    this.historyLimit = options.historyLimit ?? 1_000;
  }

  async preload(): Promise<void> {
    const rows = await this.sql<{ id: string; body: string }[]>`SELECT id, body FROM agentd_webhooks ORDER BY id`;
    this.states = [];
    for (const row of rows) {
      try {
        this.states.push(this.parse(row.id, row.body));
      } catch (error) {
        if (!(error instanceof DamagedDataError)) throw error;
        this.quarantined.set(row.id, error);
      }
    }
    const records = await this.sql<{ subscription_id: string; body: string }[]>`
      SELECT subscription_id, body FROM (
        SELECT subscription_id, seq, body, row_number() OVER (PARTITION BY subscription_id ORDER BY seq DESC) AS n FROM agentd_webhook_deliveries
      ) newest WHERE n <= ${this.historyLimit} ORDER BY subscription_id, seq`;
    this.deliveries.clear();
    for (const row of records) this.logOf(row.subscription_id).push(JSON.parse(row.body) as DeliveryRecord);
  }

  /** One conversation's subscriptions and delivery logs as stored now (this instance takes it over). */
  async loadConversation(conversationId: string): Promise<SubscriptionState[]> {
    const rows = await this.sql<{ id: string; body: string }[]>`SELECT id, body FROM agentd_webhooks WHERE conversation_id = ${conversationId} ORDER BY id`;
    const states: SubscriptionState[] = [];
    for (const row of rows) {
      try {
        states.push(this.parse(row.id, row.body));
      } catch (error) {
        if (!(error instanceof DamagedDataError)) throw error;
        this.quarantined.set(row.id, error);
        continue;
      }
      const records = await this.sql<{ body: string }[]>`
        SELECT body FROM (SELECT seq, body FROM agentd_webhook_deliveries WHERE subscription_id = ${row.id} ORDER BY seq DESC LIMIT ${this.historyLimit}) newest ORDER BY seq`;
      this.deliveries.set(row.id, records.map((record) => JSON.parse(record.body) as DeliveryRecord));
    }
    return states;
  }

  loadAll(): SubscriptionState[] {
    return this.states.map((state) => ({ ...state }));
  }

  damaged(): { id: string; damage: Damage; path: string }[] {
    return [...this.quarantined].map(([id, error]) => ({ id, damage: error.damage, path: error.path }));
  }

  save(state: SubscriptionState): void {
    const pending = this.pendingOf(state.id, state.conversation_id);
    pending.body = JSON.stringify({ ...state, secret: state.secret === null ? null : this.box.encrypt(state.secret) });
  }

  remove(subscriptionId: string): void {
    this.deliveries.delete(subscriptionId);
    const pending = this.pending.get(subscriptionId);
    if (pending) pending.removed = true;
    this.pending.delete(subscriptionId);
    this.writes.run(`webhook:${subscriptionId}`, () =>
      this.sql.begin(async (tx) => {
        await tx`DELETE FROM agentd_webhooks WHERE id = ${subscriptionId}`;
        await tx`DELETE FROM agentd_webhook_deliveries WHERE subscription_id = ${subscriptionId}`;
      }),
    );
  }

  appendDelivery(subscriptionId: string, record: DeliveryRecord): void {
    const log = this.logOf(subscriptionId);
    if (record.seq <= (log.at(-1)?.seq ?? 0)) return;
    log.push(record);
    const pending = this.pendingOf(subscriptionId, null);
    pending.deliveries.push(JSON.stringify(record));
    pending.seqs.push(record.seq);
    if (log.length >= 2 * this.historyLimit) {
      log.splice(0, log.length - this.historyLimit);
      pending.trimBelow = log[0]!.seq;
    }
  }

  /**
   * What changed since the last write of a subscription, written in one transaction: the worker
   * saves the cursor and then logs the delivery in one synchronous step, so both land together
   * (a crash never leaves the cursor moved without its log line).
   */
  private pendingOf(subscriptionId: string, conversationId: string | null): PendingWrite {
    let pending = this.pending.get(subscriptionId);
    if (pending) {
      pending.conversationId ??= conversationId;
      return pending;
    }
    pending = { conversationId, body: null, deliveries: [], seqs: [], trimBelow: null, removed: false };
    this.pending.set(subscriptionId, pending);
    const write = pending;
    this.writes.run(`webhook:${subscriptionId}`, async () => {
      if (this.pending.get(subscriptionId) === write) this.pending.delete(subscriptionId);
      if (write.removed) return;
      await this.sql.begin(async (tx) => {
        if (write.body !== null) {
          await tx`
            INSERT INTO agentd_webhooks (id, conversation_id, body) VALUES (${subscriptionId}, ${write.conversationId}, ${write.body})
            ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body`;
        }
        for (const [i, body] of write.deliveries.entries()) {
          await tx`INSERT INTO agentd_webhook_deliveries (subscription_id, seq, body) VALUES (${subscriptionId}, ${write.seqs[i]!}, ${body}) ON CONFLICT DO NOTHING`;
        }
        if (write.trimBelow !== null) await tx`DELETE FROM agentd_webhook_deliveries WHERE subscription_id = ${subscriptionId} AND seq < ${write.trimBelow}`;
      });
    });
    return pending;
  }

  readDeliveries(subscriptionId: string, options: { afterSeq: number; limit: number }): DeliveryRecord[] {
    const records = this.deliveries.get(subscriptionId) ?? [];
    let low = 0;
    let high = records.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (records[mid]!.seq <= options.afterSeq) low = mid + 1;
      else high = mid;
    }
    return records.slice(low, low + options.limit);
  }

  private logOf(subscriptionId: string): DeliveryRecord[] {
    let log = this.deliveries.get(subscriptionId);
    if (!log) {
      log = [];
      this.deliveries.set(subscriptionId, log);
    }
    return log;
  }

  private parse(id: string, body: string): SubscriptionState {
    const damaged = (reason: string) => new DamagedDataError({ file: `agentd_webhooks/${id}`, line: null, reason }, `agentd_webhooks/${id}`);
    let stored: SubscriptionState;
    try {
      stored = JSON.parse(body) as SubscriptionState;
    } catch (error) {
      throw damaged(`not valid JSON (${(error as Error).message})`);
    }
    const parsed = SubscriptionState.safeParse(stored);
    if (!parsed.success || parsed.data.id !== id) throw damaged(parsed.success ? 'not a subscription state of this row' : `not a valid subscription state (${parsed.error.issues[0]!.path.join('.')}: ${parsed.error.issues[0]!.message})`);
    try {
      return { ...parsed.data, secret: parsed.data.secret === null ? null : this.box.decrypt(parsed.data.secret) };
    } catch {
      throw damaged("its sealed secret cannot be decrypted with this server's secret key");
    }
  }
}
