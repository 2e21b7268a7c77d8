/**
 * Who runs each conversation when several instances share one database. A conversation is
 * served by the instance holding its lease (pg-leases.ts); leases are sticky: the holder renews
 * them while it lives, and requests reaching any other instance are forwarded to it
 * (forwarding.ts). A lease whose holder died is taken over at once (the holder missed three
 * heartbeats and nothing listens at its address: see confirmDead), or else once it expires (a
 * stopped holder stops renewing it):
 * - by an instance that gets a request for that conversation, and
 * - within a sweep by any instance (running conversations first: failover).
 * Taking over reads the conversation's record, runs and webhook subscriptions as stored now,
 * closes the tool calls left open and marks the run paused (or continues it, with
 * AGENTD_RESUME_ON_FAILOVER=true), then delivers its webhooks from here. Every append carries
 * the lease's fencing token, so an instance that lost a lease can write no event.
 */
import type { Logger } from 'pino';
import type { Lease } from '../postgres/pg-leases.js';
import { isConnectionError } from '../postgres/connection-errors.js';
import { PgInstances } from '../postgres/pg-instances.js';
import { addressRefuses } from './address-probe.js';
import { Replica } from './replica.js';
import type { PostgresStorage } from '../storage/index.js';
import type { AgentRuntime } from '../../core/agent/agent-runtime.js';
import type { ConversationStore } from '../../core/conversations/conversation-store.js';
import { AppError } from '../../core/errors.js';
import type { Webhooks } from '../webhooks/index.js';

export type Route = { local: true } | { local: false; url: string; owner: string };

export interface OwnershipDeps {
  pg: PostgresStorage;
  instanceUrl: string;
  ttlMs: number;
  resumeOnFailover: boolean;
  store: ConversationStore;
  agent: AgentRuntime;
  webhooks: Webhooks;
  logger: Logger;
  /** Workdir checkpoints (on the storage instances share): read again, and a rewind under way finished, when a conversation is taken over. */
  checkpoints: { adopt(conversationId: string): Promise<void> };
}

/** The conversation cannot be served here right now: the client retries after `retryAfterS` (the Retry-After header). */
export abstract class RetryLaterError extends AppError {
  constructor(
    init: { code: string; message: string; id: string },
    /** Seconds a client should wait before retrying. */
    readonly retryAfterS: number,
  ) {
    super({ code: init.code, kind: 'unavailable', message: init.message, details: { id: init.id, retry_after_s: retryAfterS } });
  }
}

export class OwnerUnavailableError extends RetryLaterError {
  constructor(id: string, retryAfterS = 1) {
    super({ code: 'owner_unavailable', message: 'The instance running this conversation does not answer and its lease has not expired yet. Retry in a few seconds.', id }, retryAfterS);
  }
}

export class TakeoverFailedError extends RetryLaterError {
  constructor(id: string) {
    super({ code: 'takeover_failed', message: 'Taking this conversation over from an instance that stopped did not finish (the database failed meanwhile); the next request tries again. Retry in a moment.', id }, 1);
  }
}

export class Ownership {
  readonly instances: PgInstances;
  readonly replica: Replica;
  /** How often this instance says it is alive, and how long a silence makes another one suspect. */
  readonly beatMs: number;
  readonly silenceMs: number;
  private readonly held = new Map<string, Lease>();
  private readonly adopting = new Map<string, Promise<Route>>();
  private timers: NodeJS.Timeout[] = [];
  private closed = false;
  private sweeps = 0;
  /**
   * The database as this instance's upkeep last found it: down (renewals and sweeps fail), and
   * when it answered again. Every lease runs out during an outage longer than a lease; for a
   * while after one, leases whose holders still answer are left to them to renew, so that a
   * run on a live instance is not taken over as if that instance had died.
   */
  private readonly database = { down: false, backAt: 0 };
  /** For /metrics: takeovers of a dead instance's running conversation, leases lost, requests forwarded, instances found dead. */
  readonly stats = { failovers: 0, takeovers: 0, lost: 0, forwarded: 0, deadInstances: 0 };

  constructor(private readonly deps: OwnershipDeps) {
    this.instances = new PgInstances(deps.pg.sql, deps.pg.instanceId, deps.instanceUrl);
    this.beatMs = Math.max(100, Math.min(500, Math.floor(deps.ttlMs / 4)));
    this.silenceMs = 3 * this.beatMs;
    const onError = (error: unknown) => deps.logger.warn({ err: error }, 'cluster upkeep failed (retried)');
    this.replica = new Replica({ pg: deps.pg, store: deps.store, holds: (id) => this.held.has(id), onError });
    deps.pg.onClaim((id) => this.held.set(id, { conversationId: id, owner: this.id, token: deps.pg.fences.get(id)!.token, expiresAt: new Date(Date.now() + deps.ttlMs) }));
  }

  get id(): string {
    return this.deps.pg.instanceId;
  }

  get ttlMs(): number {
    return this.deps.ttlMs;
  }

  holds(conversationId: string): boolean {
    return this.held.has(conversationId);
  }

  /** Whether this instance has the conversation in its view (held here or followed from the database). */
  knows(conversationId: string): boolean {
    return this.deps.store.has(conversationId);
  }

  get heldCount(): number {
    return this.held.size;
  }

  async start(): Promise<void> {
    const { ttlMs, logger } = this.deps;
    const onError = (error: unknown) => logger.warn({ err: error }, 'cluster upkeep failed (retried)');
    await this.instances.start(this.beatMs, onError);
    // Records other instances write, and their events: this instance's view of them follows.
    await this.replica.start();
    const every = (ms: number, work: () => Promise<void>) => {
      let running = false;
      const timer = setInterval(() => {
        if (running || this.closed) return;
        running = true;
        void work()
          .then(
            () => this.databaseAnswered(),
            (error: unknown) => {
              if (isConnectionError(error)) this.database.down = true;
              onError(error);
            },
          )
          .finally(() => (running = false));
      }, ms);
      timer.unref();
      this.timers.push(timer);
    };
    every(Math.max(250, Math.floor(ttlMs / 3)), () => this.renew());
    // The first sweep runs at once, without holding up start-up (it may wait out a dead holder's lease).
    every(Math.max(100, Math.min(500, Math.floor(ttlMs / 5))), () => this.sweep());
  }

  /** Where a request about this conversation is served: here (taking the lease if free or expired), or at its holder. */
  route(conversationId: string): Promise<Route> {
    // Held from the start of a takeover (adopt): a request meanwhile waits for the takeover to
    // finish, not served from a conversation half read (its runs or webhooks not yet loaded).
    const pending = this.adopting.get(conversationId);
    if (pending) return pending;
    if (this.held.has(conversationId)) return Promise.resolve({ local: true });
    const routing = this.takeOrFind(conversationId).finally(() => this.adopting.delete(conversationId));
    this.adopting.set(conversationId, routing);
    return routing;
  }

  /**
   * Whether an instance is dead: silent for `silenceMs` (it missed three heartbeats) and nothing
   * listens at its address, or a newer instance listens there now (a process restarted on the
   * dead one's port). Then its leases expire now, for whoever gets there first to take them
   * over; a silent instance whose address still accepts connections (stopped, overloaded) keeps
   * its leases until they run out.
   */
  async confirmDead(owner: string): Promise<boolean> {
    const row = await this.instances.lookup(owner);
    if (row && row.silentMs < this.silenceMs) return false;
    if (row && !(await this.instances.superseded(owner, this.silenceMs)) && !(await addressRefuses(row.url))) return false;
    const expired = await this.instances.declareDead(owner);
    if (row) {
      this.stats.deadInstances++;
      this.deps.logger.warn({ instance: owner, url: row.url, leases: expired }, 'an instance stopped answering and nothing listens at its address: its conversations are taken over now');
    }
    return true;
  }

  /** Waits (up to `silenceMs` more) for a holder whose address refused a forwarded request to be silent long enough to be declared dead. */
  async awaitDeath(owner: string): Promise<boolean> {
    const deadline = Date.now() + this.silenceMs + this.beatMs;
    for (;;) {
      if (await this.confirmDead(owner)) return true;
      if (Date.now() > deadline || this.closed) return false;
      await new Promise((resolve) => setTimeout(resolve, this.beatMs));
    }
  }

  /** Whether the holder of a conversation this instance forwards to still says it is alive (within a lease's time). */
  async answers(owner: string): Promise<boolean> {
    const row = await this.instances.lookup(owner);
    return row !== null && row.silentMs < this.deps.ttlMs;
  }

  /**
   * A client's Retry-After (at least 1 s): until the lease of the holder that did not answer runs
   * out; 1 when another instance holds it already.
   */
  async retryAfterS(conversationId: string, silentOwner?: string): Promise<number> {
    const lease = await this.deps.pg.leases.current(conversationId).catch(() => null);
    if (!lease || (silentOwner !== undefined && lease.owner !== silentOwner)) return 1;
    return Math.max(1, Math.ceil((lease.expiresAt.getTime() - Date.now()) / 1000));
  }

  private databaseAnswered(): void {
    if (!this.database.down) return;
    this.database.down = false;
    this.database.backAt = Date.now();
    this.deps.logger.info('the database answers again');
  }

  /** Whether the database is down or came back a moment ago: not long enough for every live holder to have renewed its leases. */
  private get afterOutage(): boolean {
    return this.database.down || Date.now() - this.database.backAt < this.deps.ttlMs + this.silenceMs;
  }

  /** Right after an outage, the holder of a lease that ran out meanwhile, while it still accepts connections: it renews the lease itself. */
  private async liveHolderAfterOutage(conversationId: string): Promise<Route | null> {
    if (!this.afterOutage) return null;
    const lease = await this.deps.pg.leases.current(conversationId);
    if (!lease || lease.owner === this.id) return null;
    const row = await this.instances.lookup(lease.owner);
    if (!row || row.url === this.deps.instanceUrl || (await addressRefuses(row.url))) return null;
    return { local: false, url: row.url, owner: lease.owner };
  }

  private async takeOrFind(conversationId: string, waited = false): Promise<Route> {
    const holder = await this.liveHolderAfterOutage(conversationId);
    if (holder) return holder;
    const { acquired, lease } = await this.deps.pg.leases.acquire(conversationId, this.id, this.deps.ttlMs);
    if (acquired) {
      try {
        await this.adopt(lease);
      } catch (error) {
        // Not held here until taken over whole: the next request (or sweep) takes it over again.
        this.held.delete(conversationId);
        this.deps.pg.fences.delete(conversationId);
        this.deps.logger.warn({ err: error, conversation_id: conversationId }, 'taking a conversation over failed midway (tried again with the next request)');
        throw new TakeoverFailedError(conversationId);
      }
      return { local: true };
    }
    const row = await this.instances.lookup(lease.owner);
    if (row && row.silentMs < this.silenceMs && row.url !== this.deps.instanceUrl) return { local: false, url: row.url, owner: lease.owner };
    // Its holder is silent: dead (nothing listens at its address) and taken over now, or else
    // stopped and waited out until its lease expires, once.
    if (!waited && (await this.confirmDead(lease.owner))) return this.takeOrFind(conversationId, true);
    const waitMs = lease.expiresAt.getTime() - Date.now() + 50;
    if (waited || waitMs > this.deps.ttlMs * 2) throw new OwnerUnavailableError(conversationId, Math.max(1, Math.ceil(waitMs / 1000)));
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, waitMs)));
    return this.takeOrFind(conversationId, true);
  }

  /** This instance holds the lease now: take the conversation over as it is stored. */
  private async adopt(lease: Lease): Promise<void> {
    const { pg, agent, webhooks, logger } = this.deps;
    const id = lease.conversationId;
    this.held.set(id, lease);
    pg.fences.set(id, { owner: this.id, token: lease.token });
    this.stats.takeovers++;
    const stored = await this.replica.read(id);
    this.replica.apply(id, stored);
    // Found damaged here: the other instances read it again and quarantine it too.
    if ('damaged' in stored) await pg.repository.mark(id);
    if ('damaged' in stored || !stored.record) return;
    await pg.runs.reload(id);
    // A session left from an earlier hold (its shell included) is stale: the history is folded again from the log.
    await agent.handOver(id);
    await this.deps.checkpoints.adopt(id).catch((error: unknown) => logger.error({ err: error, conversation_id: id }, 'could not finish the rewind under way after taking the conversation over'));
    webhooks.adopt(await pg.webhooks.loadConversation(id));
    if (!(await agent.recover(id, 'failover'))) return;
    this.stats.failovers++;
    logger.warn({ conversation_id: id, token: lease.token }, 'took over a conversation whose instance stopped mid-run');
    if (this.deps.resumeOnFailover) await agent.startRun(id).catch((error: unknown) => logger.error({ err: error, conversation_id: id }, 'could not continue the run after failover'));
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
    await this.deps.agent.handOver(id);
  }

  /**
   * Instances found dead have their leases expired (see confirmDead); conversations whose holder
   * died (running ones first) are taken over by whichever instance gets there first, so their
   * runs are recovered and their webhooks carry on.
   */
  private async sweep(): Promise<void> {
    if (++this.sweeps % 100 === 0) await this.instances.forget(Math.max(60_000, 10 * this.deps.ttlMs));
    for (const silent of await this.instances.silentHolders(this.silenceMs)) {
      if (this.closed) return;
      await this.confirmDead(silent.id);
    }
    // Leases that ran out during an outage are their live holders' to renew first.
    if (this.afterOutage) return;
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
