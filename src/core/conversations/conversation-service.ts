import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { isoTimestamp, systemClock, type Clock } from '../clock.js';
import { InvalidRequestError, UnprocessableError } from '../errors.js';
import { outputSchemaProblem } from '../agent/output-schema.js';
import { prepareMessageParts, type ReadWorkdirImage } from './message-images.js';
import type { ContentPart } from '../schemas/message-content.js';
import type { Page } from '../pagination.js';
import type { Conversation, CreateConversationBody, SandboxNetwork, UpdateConversationConfigBody } from '../schemas/conversation.js';
import type { AgentEvent, ConversationStatus, MultitaskStrategy, NewEvent } from '../schemas/event.js';
import { mergeLlmConfig, normalizeLlmConfig, type LlmConfig } from '../schemas/llm-config.js';
import type { AppendedEvent, EventLog } from '../events/event-log.js';
import type { EventRecorder } from '../events/event-recorder.js';
import type { ConversationRecord } from './conversation-record.js';
import type { ConfigChange, ConversationStore, ListConversationsQuery } from './conversation-store.js';
import type { Workdirs } from './workdirs.js';
import { zeroUsage } from '../schemas/usage.js';

export interface ConversationDefaults {
  llm: LlmConfig | null;
  workdirBase: string;
  /** Names of the built-in tools; a conversation's `tools` must be among them. */
  toolNames: readonly string[];
  /** `sandbox.network` of a conversation created without one, and whether `host` may be asked for. */
  network?: { default: SandboxNetwork; hostAllowed: boolean };
}

/** A user's message as the conversation service hands it on, to be appended as it is. */
export type UserMessage = Extract<NewEvent, { kind: 'message' }>;

/** What the agent runtime (the agent issue) plugs in: told about messages and deletions. */
export interface ConversationRuntime {
  /** A user message was appended; start a run or feed the running one. Returns the run id it went to. */
  onUserMessage(conversationId: string, options: { run: boolean }): Promise<string | null>;
  /** A user message arrives: routed by its multitask strategy and appended (the stored event returned); may refuse it (409). */
  takeMessage(conversationId: string, options: { run: boolean; strategy: MultitaskStrategy; message: UserMessage }): Promise<{ event: AgentEvent; runId: string | null }>;
  /** A message while an `ask_user` question is open answers it: the question's call and run, or null when none is open. */
  answerWithMessage?(conversationId: string, content: string): { tool_call_id: string; run_id: string } | null;
  /** A conversation was created without a run: what its first run will need may start now, in the background (its shell). */
  prepare?(conversationId: string): void;
  /**
   * The conversation is about to be deleted: stop its run and processes. `awaitShellExit: false`:
   * its shell's processes are killed, their exits not waited for (the workdir stays).
   */
  dispose(conversationId: string, options?: { awaitShellExit?: boolean }): Promise<void>;
  /** The workdir is about to change: refuse while a run is going, else let go of the old one (the shell). */
  beforeWorkdirChange(conversationId: string): Promise<void>;
}

/**
 * What clients do to conversations: create, reconfigure, delete, post messages. The records
 * themselves belong to the ConversationStore (their one owner); this service checks requests,
 * prepares workdirs, appends the user's events and hands runs to the agent runtime.
 */
export class ConversationService {
  constructor(
    private readonly deps: {
      store: ConversationStore;
      /** Workdirs made ready and removed (the file system, through an adapter). */
      workdirs: Workdirs;
      log: EventLog;
      recorder: EventRecorder;
      defaults: ConversationDefaults;
      /** The agent: told about messages, deletions and workdir changes; none: messages are only stored. */
      runtime?: ConversationRuntime;
      /** What else holds per-conversation state, told after a deletion, with the deleted record (secret maskers, webhook subscriptions, the sandbox's workdir state). */
      onDeleted?: readonly ((conversationId: string, record: Readonly<ConversationRecord>) => void | Promise<void>)[];
      /** Reads a message's workdir image (the workspace's safe resolution); none: image paths are refused. */
      readImage?: (conversationId: string, ...args: Parameters<ReadWorkdirImage>) => ReturnType<ReadWorkdirImage>;
      /**
       * The id and default workdir of the next conversation created with the defaults, whose shell
       * already starts there (agent/warm-shells.ts); null when none is ready.
       */
      warmShells?: { take(): { id: string; workdir: string } | null };
      clock?: Clock;
    },
  ) {}

  private get clock(): Clock {
    return this.deps.clock ?? systemClock;
  }

  private get store(): ConversationStore {
    return this.deps.store;
  }

  private get runtime(): ConversationRuntime | undefined {
    return this.deps.runtime;
  }

  get(id: string): Conversation {
    return this.store.get(id);
  }

  list(query: ListConversationsQuery): Page<Conversation> {
    return this.store.list(query);
  }

  /** `owner`: only that owner's conversations. */
  count(status?: ConversationStatus, owner?: string): number {
    return this.store.count(status, owner);
  }

  /** `owner`: who the conversation belongs to (the calling key's owner). */
  async create(body: CreateConversationBody, options: { owner?: string } = {}): Promise<{ conversation: Conversation; record: ConversationRecord }> {
    const llm = body.llm ? normalizeLlmConfig(body.llm) : this.deps.defaults.llm;
    const tools = body.tools ? this.checkTools(body.tools) : [...this.deps.defaults.toolNames];
    const network = this.checkNetwork(body.sandbox?.network);
    const startsRun = body.initial_message !== undefined && (body.run ?? true);
    if (startsRun && this.runtime && !llm) throw llmNotConfigured();
    // A conversation with the defaults (its workdir, its network) that will run the bash tool: its
    // shell may have started before it was asked for.
    const defaultNetwork = (this.deps.defaults.network?.default ?? true) === network;
    const warm = body.workdir === undefined && defaultNetwork && llm && tools.includes('bash') && this.runtime ? (this.deps.warmShells?.take() ?? null) : null;
    const id = warm?.id ?? randomUUID();
    const { workdir, created } = warm ? { workdir: warm.workdir, created: true } : this.deps.workdirs.prepare(body.workdir ?? path.join(this.deps.defaults.workdirBase, id), { isDefault: body.workdir === undefined });
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
      usage: zeroUsage(),
      created_at: now,
      updated_at: now,
      metadata: body.metadata ?? {},
      ...(options.owner !== undefined && { owner: options.owner }),
      sandbox: { network },
      ...(body.mcp_servers && { mcp_servers: body.mcp_servers }),
      ...(body.project_mcp_servers !== undefined && { project_mcp_servers: body.project_mcp_servers }),
      ...(body.permissions && { permissions: body.permissions }),
      ...(body.hooks && { hooks: body.hooks }),
      ...(body.agents && { agents: body.agents }),
      ...(body.setting_sources && { setting_sources: body.setting_sources }),
      ...(body.condenser !== undefined && { condenser: body.condenser }),
      ...(body.multitask_strategy && { multitask_strategy: body.multitask_strategy }),
      ...(body.budget && { budget: body.budget }),
      secrets: { ...body.secrets },
    };
    this.store.add(record);
    try {
      // The first message before the record reaches the disk: a crash in between leaves a log
      // without a record (removed at load), never a conversation without the message it was created with.
      if (body.initial_message !== undefined) await this.append(id, { kind: 'message', source: 'user', role: 'user', content: body.initial_message });
      this.store.persist(id);
    } catch (error) {
      // E.g. the disk is full: the conversation was never created, so its first message goes too.
      this.store.remove(id, { persisted: false });
      await this.deps.log.drop(id);
      throw error;
    }
    if (startsRun) await this.runtime?.onUserMessage(id, { run: true });
    else this.runtime?.prepare?.(id);
    return { conversation: this.store.toPublic(record), record };
  }

  /**
   * A conversation made elsewhere (a fork) whose events are already in the log: its record is
   * saved (the moment it exists: a crash before leaves a log without a record, removed at load)
   * and indexed.
   */
  adopt(record: ConversationRecord, eventCount: number): Conversation {
    this.store.adopt(record, eventCount);
    return this.store.toPublic(record);
  }

  /** Where conversations without a workdir of their own get one, and how workdirs are made and removed. */
  get workdirBase(): string {
    return this.deps.defaults.workdirBase;
  }

  get workdirs(): Workdirs {
    return this.deps.workdirs;
  }

  async updateConfig(id: string, body: UpdateConversationConfigBody): Promise<Conversation> {
    const record = this.store.record(id);
    if (body.workdir !== undefined && body.workdir !== record.workdir) await this.runtime?.beforeWorkdirChange(id);
    if (body.llm && !record.llm && !body.llm.model) {
      throw new UnprocessableError('llm_model_required', 'This conversation has no LLM yet: the update must name a model.');
    }
    // What can be refused is settled before anything changes: a refused update changes nothing.
    const moved = body.workdir !== undefined && body.workdir !== record.workdir ? this.deps.workdirs.prepare(body.workdir, { isDefault: false }) : null;
    const change: ConfigChange = {
      max_iterations_per_run: body.max_iterations_per_run,
      title: body.title,
      mcp_servers: body.mcp_servers,
      project_mcp_servers: body.project_mcp_servers,
      permissions: body.permissions,
      hooks: body.hooks,
      setting_sources: body.setting_sources,
      condenser: body.condenser,
      multitask_strategy: body.multitask_strategy,
      agents: body.agents,
      budget: body.budget,
      ...(body.llm && { llm: mergeLlmConfig(record.llm, { model: record.llm?.model ?? body.llm.model!, ...body.llm }) }),
      ...(moved && { workdir: moved.workdir, workdir_created: moved.created }),
    };
    this.store.configure(id, change);
    return this.store.get(id);
  }

  async delete(id: string, options: { deleteWorkdir: boolean }): Promise<void> {
    const record = this.store.find(id);
    // A quarantined conversation never ran in this process: nothing to stop. The workdir is removed
    // only once every process that could write in it is gone; kept, its shell's end is not waited for.
    if (!record.quarantine) await this.runtime?.dispose(id, { awaitShellExit: options.deleteWorkdir });
    // The record first: a crash midway leaves files without a record (removed at load), never a
    // conversation that lost its events.
    await this.store.remove(id, { persisted: true });
    await this.deps.log.drop(id);
    this.deps.recorder.closeConversation(id);
    if (options.deleteWorkdir && record.workdir_created) await this.deps.workdirs.remove(record.workdir);
    for (const listener of this.deps.onDeleted ?? []) await listener(id, record);
  }

  /** Append a user message; start a run or feed the running one unless `run` is false. */
  async postMessage(id: string, body: { content: string | ContentPart[]; run: boolean; multitask_strategy?: MultitaskStrategy | undefined; output_schema?: Record<string, unknown> | undefined }) {
    const record = this.store.record(id);
    if (body.run && this.runtime && !record.llm) throw llmNotConfigured();
    const schemaProblem = body.output_schema ? outputSchemaProblem(body.output_schema) : null;
    if (schemaProblem) throw new InvalidRequestError('invalid_output_schema', `${schemaProblem}.`);
    const prepared = typeof body.content === 'string' ? { content: body.content, parts: null } : await prepareMessageParts(body.content, (path, options) => this.readImage(id, path, options));
    // A message while the agent waits on an `ask_user` question is the answer (the model reads it as the call's result).
    const answered = this.runtime?.answerWithMessage?.(id, prepared.content) ?? null;
    if (answered) {
      const appended = await this.append(id, { kind: 'message', source: 'user', role: 'user', content: prepared.content, answers_tool_call_id: answered.tool_call_id });
      return { event: appended.event, run_id: answered.run_id };
    }
    const message: UserMessage = { kind: 'message', source: 'user', role: 'user', content: prepared.content, ...(prepared.parts && { parts: prepared.parts }), ...(body.output_schema && { output_schema: body.output_schema }) };
    if (!this.runtime) return { event: (await this.append(id, message)).event, run_id: null };
    // The runtime appends it: during a run, its strategy decides whether it is appended at all, and it is marked with it.
    const taken = await this.runtime.takeMessage(id, { run: body.run, strategy: body.multitask_strategy ?? record.multitask_strategy ?? 'enqueue', message });
    return { event: taken.event, run_id: taken.runId };
  }

  private readImage(id: string, ...args: Parameters<ReadWorkdirImage>): ReturnType<ReadWorkdirImage> {
    if (!this.deps.readImage) throw new InvalidRequestError('images_unavailable', 'This server does not read workdir images.');
    return this.deps.readImage(id, ...args);
  }

  async append(id: string, event: NewEvent): Promise<AppendedEvent> {
    this.store.refuseIfQuarantined(id);
    return this.deps.recorder.append(id, event);
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
