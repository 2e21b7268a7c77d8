import type { ConversationStatus } from '../schemas/event.js';
import type { Check, Health, Info } from '../schemas/server-status.js';

/** Stored data found damaged and quarantined (kept as found, never written). */
export interface Quarantined {
  conversations: readonly { id: string }[];
  callbacks: readonly { id: string }[];
  schedules: readonly { id: string }[];
}

export interface ServerStatusDeps {
  version: string;
  startedAt: number;
  toolNames: readonly string[];
  conversations: { readonly isLoaded: boolean; count(): number; countsByStatus(): Record<ConversationStatus, number> };
  /** Probes the data dir with a small write (an adapter: see disk-space.ts). */
  dataDirWritable(): Check;
  quarantined(): Quarantined;
  sseSubscribers(): number;
  firehoseHead(): Promise<number>;
  /** The shared stores, when there are (the database must answer; NATS only degrades). */
  storageChecks?(): Promise<{ database?: Check; nats?: Check }>;
  /** The settings reported as limits; the server's whole config satisfies it. */
  settings: LimitSettings;
  /** The sandbox as detected at start-up: reported as it is. */
  sandbox: Info['sandbox'];
  /** Set when a workdir the user brought could not be id-mapped: the sandbox check's detail (still ok). */
  sandboxNote?(): string | null;
}

export interface LimitSettings {
  maxBodyBytes: number;
  maxUploadBytes: number;
  sseHeartbeatMs: number;
  sseMaxBuffered: number;
  connections: { max: number; perClient: number };
}

/**
 * What `/health` and `/info` report, computed here so that the routes only send it: readiness
 * (state loaded, data dir writable; damaged data degrades but does not fail it) and the
 * server's figures.
 */
export class ServerStatus {
  private readonly limits: Info['limits'];

  constructor(private readonly deps: ServerStatusDeps) {
    const { settings } = deps;
    this.limits = {
      max_body_bytes: settings.maxBodyBytes,
      max_upload_bytes: settings.maxUploadBytes,
      max_page_limit: 1000,
      default_max_iterations_per_run: 500,
      sse_heartbeat_s: settings.sseHeartbeatMs / 1000,
      sse_max_buffered_events: settings.sseMaxBuffered,
      max_connections: settings.connections.max || null,
      max_connections_per_client: settings.connections.perClient || null,
    };
  }

  async readiness(): Promise<{ ready: boolean; report: Health }> {
    const stateLoaded = this.deps.conversations.isLoaded;
    const writable = this.deps.dataDirWritable();
    const shared = (await this.deps.storageChecks?.()) ?? {};
    const ready = stateLoaded && writable.ok && (shared.database?.ok ?? true);
    const { conversations, callbacks, schedules } = this.deps.quarantined();
    const damaged = conversations.length + callbacks.length + schedules.length;
    const quarantined = {
      ok: damaged === 0,
      detail: damaged === 0 ? null : `stored data damaged: ${conversations.length} conversation(s), ${callbacks.length} callback(s) and ${schedules.length} schedule(s) quarantined, files kept as found`,
      conversations: conversations.map((entry) => entry.id),
      callbacks: callbacks.map((entry) => entry.id),
      schedules: schedules.map((entry) => entry.id),
    };
    // Unsandboxed still serves, but an operator (or a probe) must see it: the agent can read the keys and every conversation.
    const sandboxed = this.deps.sandbox.mode !== 'none';
    const sandbox = { ok: sandboxed, detail: sandboxed ? (this.deps.sandboxNote?.() ?? null) : "no sandbox: the agent's commands run unsandboxed on the host, as the server's user (see the start-up warning)" };
    return {
      ready,
      report: {
        status: !ready ? 'unavailable' : damaged > 0 || shared.nats?.ok === false || !sandboxed ? 'degraded' : 'ok',
        checks: { state_loaded: { ok: stateLoaded, detail: stateLoaded ? null : 'loading' }, data_dir_writable: writable, quarantined, sandbox, ...shared },
      },
    };
  }

  async info(): Promise<Info> {
    return {
      name: 'agentd',
      version: this.deps.version,
      runtime: { name: 'node', version: process.versions.node },
      uptime_s: Math.round((Date.now() - this.deps.startedAt) / 100) / 10,
      conversations: { total: this.deps.conversations.count(), by_status: this.deps.conversations.countsByStatus() },
      tools: [...this.deps.toolNames],
      sse_subscribers: this.deps.sseSubscribers(),
      firehose_cursor: await this.deps.firehoseHead(),
      limits: this.limits,
      sandbox: this.deps.sandbox,
    };
  }
}
