import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { isoTimestamp, systemClock, type Clock } from '../clock.js';
import { ConversationQuarantinedError, DamagedDataError, NotFoundError, UnprocessableError, type Damage } from '../errors.js';
import { decodePageId, encodePageId, isKeyCursor, type Page } from '../pagination.js';
import type { Conversation, CreateConversationBody, SandboxNetwork, UpdateConversationConfigBody } from '../schemas/conversation.js';
import type { ConversationStatus, NewEvent } from '../schemas/event.js';
import { mergeLlmConfig, normalizeLlmConfig, redactLlmConfig, type LlmConfig } from '../schemas/llm-config.js';
import type { AppendedEvent, EventLog } from '../events/event-log.js';
import type { EventRecorder } from '../events/event-recorder.js';
import type { ConversationRecord, ConversationRepository } from './conversation-record.js';
import { SortedIndex } from './sorted-index.js';
import { placeholderRecord } from './placeholder-record.js';
import type { ConversationSummary } from './summary-store.js';
import { publicHooks } from '../schemas/tool-control.js';
import { publicMcpServers } from '../schemas/mcp-servers.js';

export interface ConversationDefaults {
  llm: LlmConfig | null;
  workdirBase: string;
  /** Workdirs may not lie inside this directory (the server's data: keys, other conversations). */
  dataDir: string;
  /** Names of the built-in tools; a conversation's `tools` must be among them. */
  toolNames: readonly string[];
  /** `sandbox.network` of a conversation created without one, and whether `host` may be asked for. */
  network?: { default: SandboxNetwork; hostAllowed: boolean };
}

/** What the agent runtime (the agent issue) plugs in: told about messages and deletions. */
export interface ConversationRuntime {
  /** A user message was appended; start a run or feed the running one. Returns the run id it went to. */
  onUserMessage(conversationId: string, options: { run: boolean }): Promise<string | null>;
  /** The conversation is about to be deleted: stop its run and processes. */
  dispose(conversationId: string): Promise<void>;
  /** The workdir is about to change: refuse while a run is going, else let go of the old one (the shell). */
  beforeWorkdirChange(conversationId: string): Promise<void>;
}

export interface ListConversationsQuery {
  status?: ConversationStatus | undefined;
  sort: 'created_at' | 'updated_at';
  order: 'asc' | 'desc';
  pageId?: string | undefined;
  limit: number;
}

export class ConversationService {
  private readonly records = new Map<string, ConversationRecord>();
  private readonly byCreated = new SortedIndex<ConversationRecord>((record) => record.created_at);
  private readonly byUpdated = new SortedIndex<ConversationRecord>((record) => record.updated_at);
  private runtime: ConversationRuntime | null = null;
  private readonly deletedListeners = new Set<(conversationId: string) => void | Promise<void>>();
  /** Per conversation: how many events its log holds (the seq of the last one). */
  private readonly eventCounts = new Map<string, number>();
  /** Bumped whenever a record is created, saved or deleted (caches derived from records check it). */
  revision = 0;
  private loaded = false;

  constructor(
    private readonly deps: {
      repository: ConversationRepository;
      log: EventLog;
      recorder: EventRecorder;
      defaults: ConversationDefaults;
      clock?: Clock;
      /** Read a conversation's other stores at load (its runs): each throws DamagedDataError when damaged. */
      integrityChecks?: readonly ((conversationId: string) => void)[];
    },
  ) {
    deps.recorder.onAppend(({ event }) => {
      const record = this.records.get(event.conversation_id);
      if (!record) return;
      this.eventCounts.set(record.id, event.seq);
      this.touch(record, event.timestamp);
    });
  }

  private get clock(): Clock {
    return this.deps.clock ?? systemClock;
  }

  attachRuntime(runtime: ConversationRuntime): void {
    this.runtime = runtime;
  }

  /** Called after a conversation is deleted (its subscriptions, caches and such go too). */
  onDeleted(listener: (conversationId: string) => void | Promise<void>): void {
    this.deletedListeners.add(listener);
  }

  /**
   * Load every conversation. One whose stored data is damaged is quarantined, not fatal: it is
   * listed with status `error` and the damage, refuses everything but reads of its summary and
   * deletion, and its files are never written. Returns the quarantined ones.
   *
   * `summaries` (saved at the last clean shutdown) spare reading each conversation's log: only
   * the conversations without one (after a crash: all of them) have their last event read.
   */
  async load(summaries: ReadonlyMap<string, ConversationSummary> | null = null): Promise<{ id: string; error: DamagedDataError }[]> {
    const { records, damaged } = await this.deps.repository.loadAll();
    const quarantined = [...damaged];
    for (const record of records) {
      try {
        // Appends move updated_at in memory only (see touch): the summary, or else the last event in the log, says when the conversation last changed.
        const summary = summaries?.get(record.id) ?? (await this.summaryFromLog(record.id));
        if (summary.updated_at > record.updated_at) record.updated_at = summary.updated_at;
        this.eventCounts.set(record.id, summary.event_count);
        for (const check of this.deps.integrityChecks ?? []) check(record.id);
      } catch (error) {
        if (!(error instanceof DamagedDataError)) throw error;
        quarantined.push({ id: record.id, error });
        this.deps.log.quarantine(record.id, error);
        record.quarantine = error.damage;
        record.status = 'error';
      }
      this.index(record);
    }
    for (const { id, error } of damaged) {
      this.deps.log.quarantine(id, error);
      this.index(placeholderRecord({ id, damage: error.damage, now: isoTimestamp(this.clock.now()) }));
    }
    this.loaded = true;
    return quarantined;
  }

  private async summaryFromLog(id: string): Promise<ConversationSummary> {
    const [last] = await this.deps.log.read(id, { order: 'desc', limit: 1 });
    return { updated_at: last?.event.timestamp ?? '', event_count: last?.event.seq ?? 0 };
  }

  /** What start-up needs of each conversation that is not quarantined, to be saved at shutdown. */
  summaries(): Map<string, ConversationSummary> {
    const out = new Map<string, ConversationSummary>();
    for (const record of this.all()) out.set(record.id, { updated_at: record.updated_at, event_count: this.eventCounts.get(record.id) ?? 0 });
    return out;
  }

  /**
   * A conversation whose log turned out damaged on first use: quarantined from now on, as if it
   * had been found at start-up (status `error`, listed in /health, its files never written).
   */
  quarantineFound(id: string, error: DamagedDataError): boolean {
    // At load the record is not indexed yet: load() quarantines it itself.
    const record = this.records.get(id);
    if (!record || record.quarantine) return false;
    record.quarantine = error.damage;
    record.status = 'error';
    this.revision += 1;
    return true;
  }

  /** Conversations quarantined because their stored data is damaged. */
  quarantined(): { id: string; damage: Damage }[] {
    const out: { id: string; damage: Damage }[] = [];
    for (const record of this.records.values()) if (record.quarantine) out.push({ id: record.id, damage: record.quarantine });
    return out;
  }

  get isLoaded(): boolean {
    return this.loaded;
  }

  async create(body: CreateConversationBody): Promise<{ conversation: Conversation; record: ConversationRecord }> {
    const llm = body.llm ? normalizeLlmConfig(body.llm) : this.deps.defaults.llm;
    const tools = body.tools ? this.checkTools(body.tools) : [...this.deps.defaults.toolNames];
    const network = this.checkNetwork(body.sandbox?.network);
    const startsRun = body.initial_message !== undefined && (body.run ?? true);
    if (startsRun && this.runtime && !llm) throw llmNotConfigured();
    const id = randomUUID();
    const { workdir, created } = this.prepareWorkdir(body.workdir ?? path.join(this.deps.defaults.workdirBase, id), body.workdir === undefined);
    const now = isoTimestamp(this.clock.now());
    const record: ConversationRecord = {
      id,
      title: body.title ?? null,
      status: 'idle',
      workdir,
      workdir_created: created,
      llm,
      tools,
      max_iterations_per_run: body.max_iterations_per_run,
      confirmation_mode: body.confirmation_mode,
      pending_actions: [],
      current_run_id: null,
      usage: { prompt_tokens: 0, completion_tokens: 0, cost: 0, cached_tokens: 0, reasoning_tokens: 0 },
      created_at: now,
      updated_at: now,
      metadata: body.metadata ?? {},
      sandbox: { network },
      ...(body.mcp_servers && { mcp_servers: body.mcp_servers }),
      ...(body.permissions && { permissions: body.permissions }),
      ...(body.hooks && { hooks: body.hooks }),
      ...(body.setting_sources && { setting_sources: body.setting_sources }),
      secrets: { ...body.secrets },
    };
    this.index(record);
    try {
      // The first message before the record reaches the disk: a crash in between leaves a log
      // without a record (removed at load), never a conversation without the message it was created with.
      if (body.initial_message !== undefined) await this.append(id, { kind: 'message', source: 'user', role: 'user', content: body.initial_message });
      this.deps.repository.save(record);
    } catch (error) {
      // E.g. the disk is full: the conversation was never created, so its first message goes too.
      this.unindex(record);
      await this.deps.log.drop(id);
      throw error;
    }
    if (startsRun) await this.runtime?.onUserMessage(id, { run: true });
    return { conversation: this.toPublic(record), record };
  }

  /**
   * A conversation made elsewhere (a fork) whose events are already in the log: its record is
   * saved (the moment it exists: a crash before leaves a log without a record, removed at load)
   * and indexed.
   */
  adopt(record: ConversationRecord, eventCount: number): Conversation {
    this.deps.repository.save(record);
    this.eventCounts.set(record.id, eventCount);
    this.index(record);
    return this.toPublic(record);
  }

  /** Where conversations without a workdir of their own get one. */
  get workdirBase(): string {
    return this.deps.defaults.workdirBase;
  }

  get(id: string): Conversation {
    return this.toPublic(this.find(id));
  }

  /** The internal record (for services of the same conversation: secrets, agent, files); refused while quarantined. */
  record(id: string): ConversationRecord {
    const record = this.find(id);
    if (record.quarantine) throw new ConversationQuarantinedError(id, record.quarantine);
    return record;
  }

  private find(id: string): ConversationRecord {
    const record = this.records.get(id);
    if (!record) throw new NotFoundError('conversation', id);
    return record;
  }

  has(id: string): boolean {
    return this.records.has(id);
  }

  list(query: ListConversationsQuery): Page<Conversation> {
    const index = query.sort === 'created_at' ? this.byCreated : this.byUpdated;
    const cursor = query.pageId ? decodePageId(query.pageId, isKeyCursor) : undefined;
    const filter = query.status ? (record: ConversationRecord) => record.status === query.status : undefined;
    const { items, more } = index.page({ order: query.order, limit: query.limit, filter, ...(cursor ? { after: { key: cursor.k, id: cursor.i } } : {}) });
    const last = items[items.length - 1];
    return {
      items: items.map((record) => this.toPublic(record)),
      next_page_id: more && last ? encodePageId({ k: query.sort === 'created_at' ? last.created_at : last.updated_at, i: last.id }) : null,
    };
  }

  count(status?: ConversationStatus): number {
    if (!status) return this.records.size;
    let n = 0;
    for (const record of this.records.values()) if (record.status === status) n += 1;
    return n;
  }

  countsByStatus(): Record<ConversationStatus, number> {
    const counts: Record<ConversationStatus, number> = { idle: 0, running: 0, paused: 0, waiting_for_confirmation: 0, finished: 0, error: 0, stuck: 0 };
    for (const record of this.records.values()) counts[record.status] += 1;
    return counts;
  }

  /** Every conversation but the quarantined ones. */
  *all(): IterableIterator<ConversationRecord> {
    for (const record of this.records.values()) if (!record.quarantine) yield record;
  }

  async updateConfig(id: string, body: UpdateConversationConfigBody): Promise<Conversation> {
    const record = this.record(id);
    if (body.workdir !== undefined && body.workdir !== record.workdir) await this.runtime?.beforeWorkdirChange(id);
    if (body.llm && !record.llm && !body.llm.model) {
      throw new UnprocessableError('llm_model_required', 'This conversation has no LLM yet: the update must name a model.');
    }
    // What can be refused is settled before anything changes: a refused update changes nothing.
    const moved = body.workdir !== undefined && body.workdir !== record.workdir ? this.prepareWorkdir(body.workdir, false) : null;
    if (body.llm) record.llm = mergeLlmConfig(record.llm, { model: record.llm?.model ?? body.llm.model!, ...body.llm });
    if (moved) {
      record.workdir = moved.workdir;
      record.workdir_created = moved.created;
    }
    if (body.max_iterations_per_run !== undefined) record.max_iterations_per_run = body.max_iterations_per_run;
    if (body.title !== undefined) record.title = body.title;
    if (body.mcp_servers !== undefined) record.mcp_servers = body.mcp_servers;
    if (body.permissions !== undefined) record.permissions = body.permissions;
    if (body.hooks !== undefined) record.hooks = body.hooks;
    if (body.setting_sources !== undefined) record.setting_sources = body.setting_sources;
    this.save(record);
    return this.toPublic(record);
  }

  async delete(id: string, options: { deleteWorkdir: boolean }): Promise<void> {
    const record = this.find(id);
    // A quarantined conversation never ran in this process: nothing to stop.
    if (!record.quarantine) await this.runtime?.dispose(id);
    this.unindex(record);
    // The record first: a crash midway leaves files without a record (removed at load), never a
    // conversation that lost its events.
    this.deps.repository.remove(id);
    await this.deps.log.drop(id);
    this.deps.recorder.closeConversation(id);
    if (options.deleteWorkdir && record.workdir_created) fs.rmSync(record.workdir, { recursive: true, force: true });
    for (const listener of this.deletedListeners) await listener(id);
  }

  /** Append a user message; start a run or feed the running one unless `run` is false. */
  async postMessage(id: string, body: { content: string; run: boolean }) {
    const record = this.record(id);
    if (body.run && this.runtime && !record.llm) throw llmNotConfigured();
    const appended = await this.append(id, { kind: 'message', source: 'user', role: 'user', content: body.content });
    const runId = this.runtime ? await this.runtime.onUserMessage(id, { run: body.run }) : null;
    return { event: appended.event, run_id: runId };
  }

  async append(id: string, event: NewEvent): Promise<AppendedEvent> {
    const record = this.records.get(id);
    if (record?.quarantine) throw new ConversationQuarantinedError(id, record.quarantine);
    return this.deps.recorder.append(id, event);
  }

  /** Persist a changed record now (status changes, config, pending actions, usage). */
  save(record: ConversationRecord): void {
    if (record.quarantine) throw new ConversationQuarantinedError(record.id, record.quarantine);
    this.touch(record, isoTimestamp(this.clock.now()));
    this.revision += 1;
    this.deps.repository.save(record);
  }

  toPublic(record: ConversationRecord): Conversation {
    return {
      id: record.id,
      title: record.title,
      status: record.status,
      workdir: record.workdir,
      llm: record.llm ? redactLlmConfig(record.llm) : null,
      tools: record.tools,
      max_iterations_per_run: record.max_iterations_per_run,
      confirmation_mode: record.confirmation_mode,
      pending_actions: record.pending_actions,
      current_run_id: record.current_run_id,
      event_count: this.eventCount(record),
      usage: record.usage,
      created_at: record.created_at,
      updated_at: record.updated_at,
      metadata: record.metadata,
      sandbox: { network: record.sandbox?.network ?? true },
      mcp_servers: publicMcpServers(record.mcp_servers),
      permissions: record.permissions ?? {},
      hooks: publicHooks(record.hooks),
      setting_sources: record.setting_sources ?? ['project'],
      quarantine: record.quarantine ?? null,
    };
  }

  private eventCount(record: ConversationRecord): number {
    return record.quarantine ? 0 : (this.eventCounts.get(record.id) ?? 0);
  }

  private touch(record: ConversationRecord, timestamp: string): void {
    if (timestamp <= record.updated_at) return;
    const old = record.updated_at;
    record.updated_at = timestamp;
    this.byUpdated.update(record, old);
  }

  private index(record: ConversationRecord): void {
    this.revision += 1;
    this.records.set(record.id, record);
    this.byCreated.insert(record);
    this.byUpdated.insert(record);
  }

  private unindex(record: ConversationRecord): void {
    this.revision += 1;
    this.records.delete(record.id);
    this.eventCounts.delete(record.id);
    this.byCreated.remove(record);
    this.byUpdated.remove(record);
  }

  /**
   * The sandbox a conversation's processes get now: a conversation created with `host` while the
   * operator allowed it falls back to `true` once the operator no longer does.
   */
  sandboxOf(record: ConversationRecord): { network: SandboxNetwork } {
    const network = record.sandbox?.network ?? true;
    return { network: network === 'host' && !(this.deps.defaults.network?.hostAllowed ?? false) ? true : network };
  }

  private checkNetwork(requested: SandboxNetwork | undefined): SandboxNetwork {
    const policy = this.deps.defaults.network ?? { default: true, hostAllowed: false };
    const network = requested ?? policy.default;
    if (network === 'host' && !policy.hostAllowed) throw hostNetworkRefused();
    return network;
  }

  private checkTools(tools: string[]): string[] {
    const known = new Set(this.deps.defaults.toolNames);
    const unknown = tools.filter((name) => !known.has(name));
    if (unknown.length > 0) {
      throw new UnprocessableError('unknown_tool', `Unknown tool name(s): ${unknown.join(', ')}.`, { unknown, available: [...known] });
    }
    return [...new Set(tools)];
  }

  private prepareWorkdir(requested: string, isDefault: boolean): { workdir: string; created: boolean } {
    if (!path.isAbsolute(requested) || requested.includes('\0')) {
      throw new UnprocessableError('invalid_workdir', 'workdir must be an absolute path.', { workdir: requested });
    }
    const existed = fs.existsSync(requested);
    if (existed && !fs.statSync(requested).isDirectory()) {
      throw new UnprocessableError('invalid_workdir', 'workdir exists and is not a directory.', { workdir: requested });
    }
    const dataDir = fs.realpathSync(this.deps.defaults.dataDir);
    if (!isDefault) {
      const nearest = realpathOfNearest(requested);
      const workdirBase = realpathOfNearest(this.deps.defaults.workdirBase);
      const underBase = isInside(nearest, workdirBase) && nearest !== workdirBase;
      if ((isInside(nearest, dataDir) && !underBase) || isInside(dataDir, nearest)) {
        throw new UnprocessableError('invalid_workdir', 'workdir may not contain or lie inside the server\'s data directory.', { workdir: requested });
      }
    }
    fs.mkdirSync(requested, { recursive: true });
    return { workdir: fs.realpathSync(requested), created: !existed };
  }
}

function hostNetworkRefused(): UnprocessableError {
  return new UnprocessableError(
    'host_network_not_allowed',
    'sandbox.network "host" (the host\'s network, loopback included) is disabled on this server: the operator can allow it with AGENTD_SANDBOX_NETWORK_HOST=true. Use true (internet, no host loopback) or false (no network).',
    { allowed: [true, false] },
  );
}

function llmNotConfigured(): UnprocessableError {
  return new UnprocessableError('llm_not_configured', 'This conversation has no LLM: set `llm` (or PUT /config), or send the message with `run: false`.');
}

function isInside(child: string, parent: string): boolean {
  const relative = path.relative(parent, child);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}

/** realpath of the path, or of its nearest existing ancestor joined with the rest. */
function realpathOfNearest(target: string): string {
  let current = target;
  const rest: string[] = [];
  while (!fs.existsSync(current)) {
    rest.unshift(path.basename(current));
    const parent = path.dirname(current);
    if (parent === current) break;
    current = parent;
  }
  return path.join(fs.realpathSync(current), ...rest);
}
