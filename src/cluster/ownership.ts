/**
 * Who runs each conversation when several instances share one database. A conversation is
 * served by the instance holding its lease (pg-leases.ts); leases are sticky: the holder renews
 * them while it lives, and requests reaching any other instance are forwarded to it
 * (forwarding.ts). A lease whose holder stopped renewing it (the process died) is taken over:
 * - at once by an instance that gets a request for that conversation, and
 * - within a sweep by any instance (running conversations first: failover).
 * Taking over reads the conversation's record, runs and webhook subscriptions as stored now,
 * closes the tool calls left open and marks the run paused (or continues it, with
 * AGENTD_RESUME_ON_FAILOVER=true), then delivers its webhooks from here. Every append carries
 * the lease's fencing token, so an instance that lost a lease can write no event.
 */
import type { Logger } from 'pino';
import type { Lease } from '../adapters/postgres/pg-leases.js';
import { PgInstances } from '../adapters/postgres/pg-instances.js';
import type { PostgresStorage } from '../compose-storage.js';
import type { AgentRuntime } from '../core/agent/agent-runtime.js';
import type { AgentSessions } from '../core/agent/agent-sessions.js';
import type { ConversationStore } from '../core/conversations/conversation-store.js';
import { AppError } from '../core/errors.js';
import type { Webhooks } from '../compose-webhooks.js';

export type Route = { local: true } | { local: false; url: string; owner: string };

export interface OwnershipDeps {
  pg: PostgresStorage;
  instanceUrl: string;
  ttlMs: number;
  resumeOnFailover: boolean;
  store: ConversationStore;
  agent: AgentRuntime;
  sessions: AgentSessions;
  webhooks: Webhooks;
  logger: Logger;
}

export class OwnerUnavailableError extends AppError {
  constructor(id: string) {
    super({ code: 'owner_unavailable', kind: 'unavailable', message: 'The instance running this conversation does not answer and its lease has not expired yet. Retry in a few seconds.', details: { id } });
  }
}

export class Ownership {
  readonly instances: PgInstances;
  private readonly held = new Map<string, Lease>();
  private readonly adopting = new Map<string, Promise<Route>>();
  private timers: NodeJS.Timeout[] = [];
  private closed = false;
  /** For /metrics: takeovers of a dead instance's running conversation, leases lost, requests forwarded. */
  readonly stats = { failovers: 0, takeovers: 0, lost: 0, forwarded: 0 };

  constructor(private readonly deps: OwnershipDeps) {
    this.instances = new PgInstances(deps.pg.sql, deps.pg.instanceId, deps.instanceUrl);
    deps.pg.onClaim((id) => this.held.set(id, { conversationId: id, owner: this.id, token: deps.pg.fences.get(id)!.token, expiresAt: new Date(Date.now() + deps.ttlMs) }));
  }

  get id(): string {
    return this.deps.pg.instanceId;
  }

  holds(conversationId: string): boolean {
    return this.held.has(conversationId);
  }

  get heldCount(): number {
    return this.held.size;
  }

  async start(): Promise<void> {
    const { ttlMs, logger } = this.deps;
    const onError = (error: unknown) => logger.warn({ err: error }, 'cluster upkeep failed (retried)');
    await this.instances.start(Math.max(250, Math.floor(ttlMs / 3)), onError);
    // Records other instances write: this instance's view of them follows.
    await this.deps.pg.repository.onChange((id) => void this.refresh(id).catch(onError));
    const every = (ms: number, work: () => Promise<void>) => {
      let running = false;
      const timer = setInterval(() => {
        if (running || this.closed) return;
        running = true;
        void work().catch(onError).finally(() => (running = false));
      }, ms);
      timer.unref();
      this.timers.push(timer);
    };
    every(Math.max(250, Math.floor(ttlMs / 3)), () => this.renew());
    // The first sweep runs at once, without holding up start-up (it may wait out a dead holder's lease).
    every(Math.max(250, Math.floor(ttlMs / 5)), () => this.sweep());
  }

  /** Where a request about this conversation is served: here (taking the lease if free or expired), or at its holder. */
  route(conversationId: string): Promise<Route> {
    if (this.held.has(conversationId)) return Promise.resolve({ local: true });
    const pending = this.adopting.get(conversationId);
    if (pending) return pending;
    const routing = this.takeOrFind(conversationId).finally(() => this.adopting.delete(conversationId));
    this.adopting.set(conversationId, routing);
    return routing;
  }

  private async takeOrFind(conversationId: string, waited = false): Promise<Route> {
    const { acquired, lease } = await this.deps.pg.leases.acquire(conversationId, this.id, this.deps.ttlMs);
    if (acquired) {
      await this.adopt(lease);
      return { local: true };
    }
    const url = await this.instances.urlOf(lease.owner, this.deps.ttlMs);
    if (url) return { local: false, url, owner: lease.owner };
    // Its holder is silent but the lease runs a little longer: wait for it to expire, once.
    const waitMs = lease.expiresAt.getTime() - Date.now() + 50;
    if (waited || waitMs > this.deps.ttlMs * 2) throw new OwnerUnavailableError(conversationId);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, waitMs)));
    return this.takeOrFind(conversationId, true);
  }

  /** This instance holds the lease now: take the conversation over as it is stored. */
  private async adopt(lease: Lease): Promise<void> {
    const { pg, store, agent, sessions, webhooks, logger } = this.deps;
    const id = lease.conversationId;
    this.held.set(id, lease);
    pg.fences.set(id, { owner: this.id, token: lease.token });
    this.stats.takeovers++;
    const record = await pg.repository.load(id);
    store.sync(id, record, await pg.log.lastSeq(id));
    if (!record) return;
    await pg.runs.reload(id);
    sessions.forget(id);
    webhooks.adopt(await pg.webhooks.loadConversation(id));
    if (!(await agent.recover(id, 'failover'))) return;
    this.stats.failovers++;
    logger.warn({ conversation_id: id, token: lease.token }, 'took over a conversation whose instance stopped mid-run');
    if (this.deps.resumeOnFailover) await agent.startRun(id).catch((error: unknown) => logger.error({ err: error, conversation_id: id }, 'could not continue the run after failover'));
  }

  /** Another instance wrote (or removed) this record: follow it, unless it runs here. */
  private async refresh(id: string): Promise<void> {
    if (this.held.has(id)) return;
    const record = await this.deps.pg.repository.load(id);
    if (this.held.has(id)) return;
    this.deps.store.sync(id, record, record ? await this.deps.pg.log.lastSeq(id) : undefined);
    // Deleted on its holder: the SSE streams of it served here end as they do there.
    if (!record) this.deps.pg.log.closeConversation(id);
  }

  private async renew(): Promise<void> {
    const ids = [...this.held.keys()];
    const renewed = await this.deps.pg.leases.renewAll(this.id, ids, this.deps.ttlMs);
    for (const id of ids) if (!renewed.has(id)) await this.lose(id);
  }

  /** The lease went to another instance (this one stalled past its expiry): stop everything of it here. */
  private async lose(id: string): Promise<void> {
    if (!this.held.delete(id)) return;
    this.deps.pg.fences.delete(id);
    // Deleted here: its lease row went with it.
    if (!this.deps.store.has(id)) return;
    this.stats.lost++;
    this.deps.logger.warn({ conversation_id: id }, 'lost the lease of a conversation: another instance runs it now');
    await this.deps.webhooks.release(id);
    await this.deps.agent.pause(id, 'shutdown').catch(() => {});
    this.deps.sessions.forget(id);
  }

  /**
   * Conversations whose holder died (running ones first): taken over by whichever instance gets
   * there first, so their runs are recovered and their webhooks carry on.
   */
  private async sweep(): Promise<void> {
    for (const id of await this.deps.pg.leases.orphaned(20)) {
      if (this.closed) return;
      await this.route(id).catch((error: unknown) => this.deps.logger.warn({ err: error, conversation_id: id }, 'failover attempt failed (retried)'));
    }
  }

  /** Shutdown (after the runs stopped): leases are given up so another instance can serve at once. */
  async close(): Promise<void> {
    this.closed = true;
    for (const timer of this.timers) clearInterval(timer);
    await Promise.all([...this.held.values()].map((lease) => this.deps.pg.leases.release(lease).catch(() => {})));
    this.held.clear();
    await this.instances.stop();
  }
}
