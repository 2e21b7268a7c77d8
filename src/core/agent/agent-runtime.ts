import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { isoTimestamp, systemClock, type Clock } from '../clock.js';
import { ConflictError, NotFoundError, StorageFullError, UnprocessableError } from '../errors.js';
import type { ConversationRecord } from '../conversations/conversation-record.js';
import type { ConversationRuntime } from '../conversations/conversation-service.js';
import type { ConversationStore } from '../conversations/conversation-store.js';
import type { EventRecorder } from '../events/event-recorder.js';
import type { AgentEvent, ConversationStatus, NewEvent } from '../schemas/event.js';
import type { CondenseBody } from '../schemas/conversation.js';
import { CondensationControl } from './condensation-control.js';
import { MessageIntake, type TakeMessageOptions } from './message-intake.js';
import { TurnInterrupts } from './turn-interrupts.js';
import type { ShellFactory } from '../tools/shell-session.js';
import type { ToolDefinition, UserAnswer, UserQuestion } from '../tools/tool.js';
import type { AgentSession } from './agent-session.js';
import type { AgentSessions } from './agent-sessions.js';
import { LlmError, type LlmClient, type LlmRetry, type LlmToolSchema, type LlmUsage } from './llm.js';
import type { Run, RunStore } from './run-record.js';
import { executeRun, type RunOutcome } from './run-loop.js';
import { buildSystemPrompt } from './system-prompt.js';
import { settleRun } from './settle-run.js';
import { waitForAnswer } from './wait-for-answer.js';
import { decodePageId, encodePageId, type Page } from '../pagination.js';

const isIndexCursor = (value: unknown): value is { i: number } => typeof value === 'object' && value !== null && Number.isInteger((value as { i: number }).i);
import { ToolGate } from './tool-gate.js';
import { HookRunner } from '../hooks/hook-runner.js';
import type { HookTransport } from '../hooks/hook-transport.js';
import { PermissionPolicy } from '../permissions/permission-policy.js';
import { readProjectPermissions } from '../permissions/project-settings.js';
import type { McpRegistry } from '../mcp/mcp-registry.js';
import { EMPTY_CATALOG, type ProjectCatalog } from '../catalog/project-catalog.js';
import type { SubagentTags } from '../schemas/event.js';
import { SKILL_TOOL_NAME } from '../tools/skill.js';
import { SLASH_COMMAND_TOOL_NAME } from '../tools/slash-command.js';
import { TASK_TOOL_NAME } from '../tools/task.js';
import { runSubagent, type SubagentHost } from './subagent-runner.js';
import { subagentSystemPrompt } from './subagent-prompt.js';
import type { RunCheckpoints } from '../checkpoints/checkpoint-service.js';
import type { WorkdirFileSystem } from '../workspace/workdir-file-system.js';
import type { ProjectFiles } from '../workspace/project-files.js';
import { readProjectContext, type ProjectContext } from './project-instructions.js';

export interface AgentRuntimeDeps {
  /** The records: read, and changed through the store's transitions. */
  conversations: ConversationStore;
  /** The sessions, whose history the recorder's history-fold reader keeps. */
  sessions: AgentSessions;
  recorder: EventRecorder;
  runs: RunStore;
  llm: LlmClient;
  tools: readonly ToolDefinition[];
  /** The workdirs' files for the tools (every path pinned inside the workdir). */
  workdirFs: WorkdirFileSystem;
  /** The project's AGENTS.md/CLAUDE.md and `.claude/settings.json` around a workdir. */
  projectFiles: ProjectFiles;
  shells: ShellFactory;
  /** Environment for the conversation's shell (its secrets). */
  shellEnv: (record: ConversationRecord) => Record<string, string>;
  /** How the conversation's hooks run: commands in its sandbox, http hooks signed. */
  hookTransport: (record: ConversationRecord) => HookTransport;
  /** Reads a message's workdir image when the LLM needs it (base64; throws when it is gone or no image). */
  readImage?: (conversationId: string, path: string) => Promise<string>;
  /** MCP servers: their tools join the built-ins for each run. */
  mcp?: McpRegistry;
  /** The project's skills, slash commands and subagent definitions (never throws: bad files are listed in `errors`). */
  catalog?: (record: ConversationRecord) => Promise<ProjectCatalog>;
  /** Levels of subagents below the main agent (default 1: a subagent has no `task` tool). */
  maxSubagentDepth?: number;
  /** Workdir checkpoints before each run and each file-changing tool call. */
  checkpoints?: RunCheckpoints;
  clock?: Clock;
  onError?: (error: unknown, context: Record<string, unknown>) => void;
  /** A failed LLM attempt that will be retried (for the server log, at warn). */
  onLlmRetry?: (retry: LlmRetry, context: { conversation_id: string; run_id: string }) => void;
  /** After this long without a run a conversation's shell, MCP servers and history are released (0 or absent: never). */
  idleTimeoutMs?: number;
  /** A run that ended in agent_error (for the server log, at error). */
  onRunFailed?: (failure: { code: string; message: string }, context: { conversation_id: string; run_id: string }) => void;
  /** The condensation threshold for models whose context window agentd does not know (AGENTD_CONDENSER_MAX_TOKENS). */
  condenserMaxTokens?: number;
}

/** The LLM's view of each tool definition (see schemasOf). */
const toolSchemas = new WeakMap<ToolDefinition, LlmToolSchema>();

/** Shutdown closes this many shells per event-loop turn. */
const SHELLS_CLOSED_PER_TURN = 8;

/** Runs the agent for every conversation: one run at a time each, owned by a lock with an AbortController. */
export class AgentRuntime implements ConversationRuntime {
  private readonly toolsByName: ReadonlyMap<string, ToolDefinition>;
  /** Conversations whose session is released when their timer fires (see releaseIdle). */
  private readonly idleTimers = new Map<string, NodeJS.Timeout>();
  /** Sessions being released: a new one waits for the old shell's state. */
  private readonly releasing = new Map<string, Promise<void>>();
  /** What released sessions left for their successors: the shell's state. */
  private readonly released = new Map<string, AgentSession['restore']>();
  private readonly intake: MessageIntake;
  private readonly condensation: CondensationControl;

  constructor(private readonly deps: AgentRuntimeDeps) {
    this.toolsByName = new Map(deps.tools.map((tool) => [tool.name, tool]));
    this.intake = new MessageIntake({
      session: (id) => this.session(id),
      onUserMessage: (id, options) => this.onUserMessage(id, options),
      cancel: (id) => this.pause(id, 'canceled'),
      startRun: (id) => this.startRun(id),
      append: (id, event) => this.append(id, event),
    });
    this.condensation = new CondensationControl({
      llm: deps.llm,
      append: async (id, event) => (await this.append(id, event)).event,
      recordUsage: (record, run, usage) => this.recordUsage(record, run, usage),
      gateFor: (record, runId, signal) => this.gateFor(record, runId, signal),
      serverMaxTokens: deps.condenserMaxTokens,
      ...(deps.onError && { onError: deps.onError }),
    });
  }

  private get sessions(): AgentSessions {
    return this.deps.sessions;
  }

  /** The conversation's session (after an idle release finished); its idle countdown runs from here. */
  private async session(conversationId: string): Promise<AgentSession> {
    const releasing = this.releasing.get(conversationId);
    if (releasing) await releasing.catch(() => undefined);
    const session = await this.deps.sessions.get(conversationId);
    const restore = this.released.get(conversationId);
    if (restore) {
      session.restore ??= restore;
      this.released.delete(conversationId);
    }
    if (!this.idleTimers.has(conversationId) && !session.active) this.armIdleTimer(conversationId);
    return session;
  }

  private append(conversationId: string, event: NewEvent) {
    return this.deps.recorder.append(conversationId, event);
  }

  private get clock(): Clock {
    return this.deps.clock ?? systemClock;
  }

  async onUserMessage(conversationId: string, options: { run: boolean }): Promise<string | null> {
    const session = await this.session(conversationId);
    if (session.active) return session.active.run.id;
    const record = this.deps.conversations.record(conversationId);
    if (!options.run || record.status === 'waiting_for_confirmation' || this.deps.checkpoints?.isRewinding(conversationId)) return null;
    return this.startRun(conversationId);
  }

  /** A user message arrives (POST /messages): see MessageIntake for what it does to a run in progress. */
  takeMessage(conversationId: string, options: TakeMessageOptions): Promise<{ event: AgentEvent; runId: string | null }> {
    return this.intake.take(conversationId, options);
  }

  /** POST /condense (see CondensationControl.request). */
  async condenseNow(conversationId: string, body: CondenseBody): Promise<{ run_id: string | null; forgotten_from_seq: number; forgotten_to_seq: number }> {
    const record = this.deps.conversations.record(conversationId);
    return this.condensation.request(await this.session(conversationId), record, body);
  }

  /** An LLM call's usage: added to the run's (when in one) and the conversation's totals, recorded as a `usage` event. */
  /** Usage of one LLM answer: added to the conversation's and the run's (and a subagent's share), recorded as an event. */
  private async recordUsage(record: Readonly<ConversationRecord>, run: Run | null, usage: LlmUsage, tags: SubagentTags = {}): Promise<void> {
    if (run) {
      addUsage(run.usage, usage);
      if (tags.agent !== undefined) {
        run.usage_by_agent ??= {};
        addUsage((run.usage_by_agent[tags.agent] ??= { prompt_tokens: 0, completion_tokens: 0, cost: 0, cached_tokens: 0, reasoning_tokens: 0 }), usage);
      }
    }
    const totals = this.deps.conversations.addUsage(record.id, usage);
    await this.append(record.id, { kind: 'usage', source: 'system', ...usage, totals: { ...totals }, run_id: run?.id ?? null, ...tags });
  }

  /** Start a run (POST /run, a message, approve, reject). A conflict while one is running. */
  async startRun(conversationId: string, options: { approved?: boolean } = {}): Promise<string> {
    const record = this.deps.conversations.record(conversationId);
    const session = await this.session(conversationId);
    if (session.active) throw new ConflictError('run_in_progress', 'A run is already in progress for this conversation.', { run_id: session.active.run.id });
    if (this.deps.checkpoints?.isRewinding(conversationId)) throw new ConflictError('rewind_in_progress', 'A rewind of this conversation is under way: start the run once it is done.');
    if (!record.llm) throw new UnprocessableError('llm_not_configured', 'This conversation has no LLM: set `llm` on create or with PUT /config (or AGENTD_LLM_MODEL on the server).');
    if (record.status === 'waiting_for_confirmation' && !options.approved) {
      throw new ConflictError('confirmation_pending', 'Actions are waiting for confirmation: approve or reject them first.', { pending_actions: record.pending_actions.length });
    }
    const approved = options.approved ? record.pending_actions : [];
    const now = isoTimestamp(this.clock.now());
    const run: Run = { id: randomUUID(), conversation_id: conversationId, status: 'running', started_at: now, ended_at: null, iterations: 0, usage: { prompt_tokens: 0, completion_tokens: 0, cost: 0, cached_tokens: 0, reasoning_tokens: 0 }, outcome: null, error: null };
    this.deps.runs.save(run);
    const before = { status: record.status, pending_actions: record.pending_actions };
    const firstRun = !session.history.hasSystemPrompt;
    // The lock is taken before anything is awaited: a second start now gets a conflict, and a pause waits for this run.
    const controller = new AbortController();
    let settled!: () => void;
    const inputFromSeq = session.history.firstUnansweredUserSeq ?? session.history.lastSeq + 1;
    const active: NonNullable<AgentSession['active']> = { run, controller, interrupts: new TurnInterrupts(), inputFromSeq, stopAs: null, done: new Promise<void>((resolve) => (settled = resolve)), catalog: EMPTY_CATALOG, subagents: new Set() };
    session.active = active;
    try {
      this.deps.conversations.setPendingActions(conversationId, []);
      await this.setStatus(record, 'running', { runId: run.id });
    } catch (error) {
      // The run could not start (e.g. the disk is full): the conversation stays as it was.
      session.active = null;
      settled();
      try {
        this.deps.conversations.restore(conversationId, before);
        this.deps.runs.save({ ...run, status: 'failed', ended_at: isoTimestamp(this.clock.now()), outcome: 'error', error: { code: (error as { code?: string }).code ?? 'internal_error', message: 'The run could not start.' } });
      } catch {
        // still failing: a restart finds the run running and pauses it
      }
      throw error;
    }
    // The project's catalog is read while the request that started the run is answered; the run waits for it before its prompt.
    const catalog = this.catalogOf(record);
    void this.drive(session, record, active, approved, firstRun, catalog).finally(settled);
    return run.id;
  }

  /** Whether a run of the conversation is in progress. */
  isRunning(conversationId: string): boolean {
    return Boolean(this.sessions.peek(conversationId)?.active);
  }

  /** A rewind changed the conversation's history: fold it again now (so a failure shows at once). */
  async refreshHistory(conversationId: string): Promise<void> {
    await this.session(conversationId);
  }

  /** Stop the run at the next safe point (interrupting a running tool). No-op when nothing runs. */
  async pause(conversationId: string, stopAs: 'paused' | 'canceled' | 'deleted' | 'shutdown' = 'paused'): Promise<void> {
    this.deps.conversations.record(conversationId);
    const active = this.sessions.peek(conversationId)?.active;
    if (!active) return;
    active.stopAs = stopAs;
    active.controller.abort(new Error(stopAs));
    await active.done;
  }

  async cancelRun(conversationId: string, runId: string): Promise<Run> {
    const run = this.getRun(conversationId, runId);
    const active = this.sessions.peek(conversationId)?.active;
    if (!active || active.run.id !== runId) throw new ConflictError('run_not_active', `Run ${runId} is not in progress (it is ${run.status}).`, { status: run.status });
    await this.pause(conversationId, 'canceled');
    return this.getRun(conversationId, runId);
  }

  /**
   * Answers the open `ask_user` question: the answer becomes the call's result and the run goes
   * on. 409 when no question is open, or `tool_call_id` names another one.
   */
  answer(conversationId: string, body: { tool_call_id?: string | undefined; content: string }, via: UserAnswer['via'] = 'answer'): { tool_call_id: string; run_id: string } {
    this.deps.conversations.record(conversationId);
    const session = this.sessions.peek(conversationId);
    const question = session?.question ?? null;
    if (!session || !question) throw new ConflictError('no_open_question', 'No question is waiting for an answer in this conversation.');
    if (body.tool_call_id !== undefined && body.tool_call_id !== question.toolCallId) {
      throw new ConflictError('question_mismatch', `The open question is tool call ${question.toolCallId}, not ${body.tool_call_id}.`, { tool_call_id: question.toolCallId });
    }
    // Taken at once: a second answer finds no open question.
    session.question = null;
    question.answer({ content: body.content, via });
    return { tool_call_id: question.toolCallId, run_id: question.runId };
  }

  /** A user message while a question is open answers it (the message is recorded as that answer). */
  answerWithMessage(conversationId: string, content: string): { tool_call_id: string; run_id: string } | null {
    if (!this.sessions.peek(conversationId)?.question) return null;
    return this.answer(conversationId, { content }, 'message');
  }

  async approve(conversationId: string): Promise<string> {
    const record = this.deps.conversations.record(conversationId);
    if (record.status !== 'waiting_for_confirmation' || record.pending_actions.length === 0) {
      throw new ConflictError('no_pending_actions', 'No actions are waiting for confirmation.');
    }
    return this.startRun(conversationId, { approved: true });
  }

  async reject(conversationId: string, reason: string | undefined): Promise<string> {
    const record = this.deps.conversations.record(conversationId);
    if (record.status !== 'waiting_for_confirmation' || record.pending_actions.length === 0) {
      throw new ConflictError('no_pending_actions', 'No actions are waiting for confirmation.');
    }
    for (const action of record.pending_actions) {
      await this.append(conversationId, { kind: 'rejection', source: 'user', tool_call_id: action.tool_call_id, tool_name: action.tool_name, reason: reason ?? '' });
    }
    this.deps.conversations.setPendingActions(conversationId, []);
    await this.setStatus(record, 'idle', { reason: 'actions rejected' });
    return this.startRun(conversationId);
  }

  setConfirmationMode(conversationId: string, enabled: boolean): void {
    this.deps.conversations.record(conversationId);
    this.deps.conversations.configure(conversationId, { confirmation_mode: enabled });
  }

  listRuns(conversationId: string): Run[] {
    this.deps.conversations.record(conversationId);
    return this.deps.runs.list(conversationId);
  }

  /** A page of the run records, oldest first unless `order` is desc. */
  runsPage(conversationId: string, query: { order: 'asc' | 'desc'; pageId?: string | undefined; limit: number }): Page<Run> {
    const all = this.listRuns(conversationId);
    const ordered = query.order === 'asc' ? all : [...all].reverse();
    const start = query.pageId ? decodePageId(query.pageId, isIndexCursor).i : 0;
    const items = ordered.slice(start, start + query.limit);
    return { items, next_page_id: start + query.limit < ordered.length ? encodePageId({ i: start + query.limit }) : null };
  }

  getRun(conversationId: string, runId: string): Run {
    const run = this.listRuns(conversationId).find((candidate) => candidate.id === runId);
    if (!run) throw new NotFoundError('run', runId);
    return run;
  }

  async beforeWorkdirChange(conversationId: string): Promise<void> {
    const session = this.sessions.peek(conversationId);
    if (session?.active) throw new ConflictError('run_in_progress', 'The workdir cannot change while a run is in progress; pause it first.', { run_id: session.active.run.id });
    await this.releasing.get(conversationId);
    this.released.delete(conversationId);
    if (session) session.restore = undefined;
    await session?.closeShell();
    await this.deps.mcp?.close(conversationId);
  }

  async dispose(conversationId: string): Promise<void> {
    await this.releasing.get(conversationId);
    clearTimeout(this.idleTimers.get(conversationId));
    this.idleTimers.delete(conversationId);
    this.released.delete(conversationId);
    await this.pause(conversationId, 'deleted');
    const session = this.sessions.forget(conversationId);
    if (session) await this.condensation.stop(session);
    await session?.closeShell();
    await this.deps.mcp?.close(conversationId);
    this.deps.runs.drop(conversationId);
  }

  /** Shutdown: pause every run (recorded as events), then close every shell. */
  async stopAll(): Promise<void> {
    for (const timer of this.idleTimers.values()) clearTimeout(timer);
    this.idleTimers.clear();
    await Promise.all(this.sessions.all().filter((s) => s.active).map((s) => this.pause(s.conversationId, 'shutdown')));
    await Promise.all(this.sessions.all().map((s) => this.condensation.stop(s)));
    // A few shells per event-loop turn: each kill may hand the CPU to the dying sandbox, and a
    // thousand in one turn would stall the loop (and the force-exit timer) for seconds.
    const closing: Promise<void>[] = [];
    for (const session of this.sessions.all()) {
      closing.push(session.closeShell());
      if (closing.length % SHELLS_CLOSED_PER_TURN === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(closing);
    await this.deps.mcp?.closeAll();
  }

  /** After a restart: a conversation that was running comes back paused, its open tool calls closed. */
  async recoverAfterRestart(): Promise<void> {
    for (const record of [...this.deps.conversations.all()]) await this.recover(record.id, 'server_restart');
  }

  /**
   * A conversation whose run was cut off (this server restarted, or the instance running it
   * died): its open tool calls are closed and the run is marked paused. Returns whether there
   * was a run to recover.
   */
  async recover(conversationId: string, outcome: 'server_restart' | 'failover'): Promise<boolean> {
    const record = this.deps.conversations.record(conversationId);
    // A run waiting for an answer (ask_user) was cut off too.
    const live = record.status === 'running' || record.status === 'waiting_for_input';
    const runs = live || record.current_run_id ? this.deps.runs.list(record.id).filter((run) => run.status === 'running') : [];
    if (!live && runs.length === 0) return false;
    const session = await this.session(record.id);
    const what = outcome === 'failover' ? 'the instance running it stopped' : 'the server restarted';
    // Subagents first (the latest started first: a nested one before the one that started it), then the main agent's calls.
    for (const [parentCallId, child] of [...session.children].reverse()) {
      for (const callId of child.history.pendingCallIds) {
        await this.append(record.id, { kind: 'observation', source: 'environment', tool_call_id: callId, tool_name: child.history.toolNameOf(callId) ?? 'unknown', content: `Interrupted: ${what} while this tool was running.`, is_error: true, data: { interrupted: true }, run_id: record.current_run_id, parent_tool_call_id: parentCallId, agent: child.agent ?? 'unknown' });
      }
    }
    for (const callId of session.history.pendingCallIds) {
      if (record.pending_actions.some((action) => action.tool_call_id === callId)) continue;
      await this.append(record.id, { kind: 'observation', source: 'environment', tool_call_id: callId, tool_name: this.toolNameOf(callId, session), content: `Interrupted: ${what} while this tool was running.`, is_error: true, data: { interrupted: true }, run_id: record.current_run_id });
    }
    const now = isoTimestamp(this.clock.now());
    for (const run of runs) this.deps.runs.save({ ...run, status: 'paused', ended_at: now, outcome });
    await this.setStatus(record, 'paused', { runId: record.current_run_id, reason: outcome === 'failover' ? 'The instance running this conversation stopped while the run was in progress.' : 'The server restarted while the run was in progress.' });
    return true;
  }

  private async drive(session: AgentSession, record: ConversationRecord, active: NonNullable<AgentSession['active']>, approved: ConversationRecord['pending_actions'], firstRun: boolean, catalog: Promise<ProjectCatalog>): Promise<void> {
    const { run, controller } = active;
    // Read at the start of the run, after the request that started it was answered: the catalog decides which of them are offered.
    const builtins: ToolDefinition[] = [];
    // One map and one schema list for the run, updated in place when an MCP server's tools change.
    const toolMap = new Map<string, ToolDefinition>();
    const toolSchemas: LlmToolSchema[] = [];
    const mcp = this.deps.mcp;
    const refreshTools = () => {
      const tools = [...builtins, ...(mcp?.tools(record.id) ?? [])];
      toolMap.clear();
      for (const tool of tools) toolMap.set(tool.name, tool);
      toolSchemas.splice(0, toolSchemas.length, ...this.schemasOf(tools));
    };
    let unsubscribe = () => {};
        const shell = () => session.shell(this.deps.shells, { workdir: record.workdir, env: () => this.deps.shellEnv(record), sandbox: this.deps.conversations.sandboxOf(record) });
    // The shell starts while the LLM thinks, so the first bash call finds it ready; after this
    // turn of the event loop, so the request that started the run is answered first. A start
    // that fails here is not this run's error: the bash tool reports it when (and if) it is called.
    if (this.enabledTools(record).some((tool) => tool.name === 'bash')) {
      setImmediate(() => {
        if (!controller.signal.aborted) shell().catch(() => {});
      });
    }
    let outcome: RunOutcome | { kind: 'error'; code: string; message: string };
    try {
      // After the request that started the run was answered: the prompt reads AGENTS.md and git.
      active.catalog = await catalog;
      builtins.push(...this.offeredTools(record, active.catalog));
      await this.recordSystemPrompt(record, session, active.catalog);
      if (mcp?.configured(record)) {
        await mcp.prepare(record);
        unsubscribe = mcp!.onToolsChanged(record.id, refreshTools);
      }
      refreshTools();
      // The first LLM turn does not wait for it; the first file-changing tool call does.
      const checkpoints = this.deps.checkpoints;
      void checkpoints?.atRunStart(record, run.id).catch(() => {});
      const gate = this.gateFor(record, run.id, controller.signal);
      // A condensation started before this run (POST /condense while idle) ends first.
      await session.condensing?.done;
      const subagents = this.subagentHost(record, session, active);
      outcome = await executeRun({
        condenser: this.condensation.forRun({ session, record, run, gate, signal: controller.signal }),
        interrupts: active.interrupts,
        gate,
        sessionStart: firstRun,
        conversationId: record.id,
        run,
        signal: controller.signal,
        history: session.history,
        llm: this.deps.llm,
        settings: () => ({ llm: record.llm!, maxIterations: record.max_iterations_per_run, confirmationMode: record.confirmation_mode }),
        tools: toolMap,
        toolSchemas,
        toolContext: {
          conversationId: record.id,
          workdir: record.workdir,
          workdirFs: this.deps.workdirFs,
          signal: controller.signal,
          state: session.toolState,
          shell,
          network: this.deps.conversations.sandboxOf(record).network,
          askUser: (question) => this.askUser({ session, record, runId: run.id, signal: controller.signal, question }),
          catalog: active.catalog,
          ...(toolMap.has(TASK_TOOL_NAME) && { runSubagent: (request) => runSubagent(subagents, toolMap, 0, request) }),
        },
        ...(this.deps.readImage && { readImage: (path: string) => this.deps.readImage!(record.id, path) }),
        append: async (event) => (await this.append(record.id, event)).event,
        delta: (text) => this.deps.recorder.delta({ kind: 'message_delta', conversation_id: record.id, run_id: run.id, content_delta: text }),
        onUsage: (usage) => this.recordUsage(record, run, usage),
        onLlmRetry: (retry) => this.deps.onLlmRetry?.(retry, { conversation_id: record.id, run_id: run.id }),
        onIteration: () => {
          run.iterations += 1;
          this.deps.runs.save(run);
        },
        setPendingActions: (actions) => this.deps.conversations.setPendingActions(record.id, actions),
        approved,
        ...(checkpoints && { beforeTool: (call: { name: string; args: Record<string, unknown> }) => checkpoints.beforeTool(record, run.id, call) }),
      });
    } catch (error) {
      if (controller.signal.aborted) outcome = { kind: 'aborted' };
      else if (error instanceof LlmError || error instanceof StorageFullError) outcome = { kind: 'error', code: error.code, message: error.message };
      else {
        this.deps.onError?.(error, { conversation_id: record.id, run_id: run.id });
        outcome = { kind: 'error', code: 'internal_error', message: 'The agent stopped on an internal error.' };
      }
    } finally {
      unsubscribe();
    }
    await settleSubagents(active);
    // internal_error was logged with its stack by onError above.
    if (outcome.kind === 'error' && outcome.code !== 'internal_error') this.deps.onRunFailed?.({ code: outcome.code, message: outcome.message }, { conversation_id: record.id, run_id: run.id });
    try {
      if (active.stopAs !== 'deleted') {
        const filesChanged = await this.deps.checkpoints?.atRunEnd(record, run.id);
        if (filesChanged) run.files_changed = filesChanged;
        await settleRun({ outcome, active, record, session, clock: this.clock, append: (event) => this.append(record.id, event), saveRun: (r) => this.deps.runs.save(r), setStatus: (status, opts) => this.setStatus(record, status, opts) });
      }
    } catch (error) {
      // Recording the end failed (e.g. the disk is full): the lock must still be released, and
      // the conversation must not look running. Its state on disk catches up with the next save
      // (a restart before that finds the run running and pauses it).
      this.deps.onError?.(error, { conversation_id: record.id, run_id: run.id, stage: 'settle' });
      this.deps.conversations.failRunning(record.id);
    } finally {
      session.active = null;
      this.armIdleTimer(record.id);
    }
    // A POST /condense the run did not get to (it ended first) is done now.
    if (active.stopAs !== 'deleted' && active.stopAs !== 'shutdown') this.condensation.afterRun(session, record);
  }

  /** (Re)starts the conversation's idle countdown. */
  private armIdleTimer(conversationId: string): void {
    const timeoutMs = this.deps.idleTimeoutMs ?? 0;
    if (timeoutMs <= 0) return;
    clearTimeout(this.idleTimers.get(conversationId));
    const timer = setTimeout(() => {
      this.idleTimers.delete(conversationId);
      void this.releaseIdle(conversationId).catch((error: unknown) => this.deps.onError?.(error, { conversation_id: conversationId, stage: 'idle_release' }));
    }, timeoutMs);
    timer.unref();
    this.idleTimers.set(conversationId, timer);
  }

  /**
   * An idle conversation gives back what it holds: its shell (every sandbox process, its state
   * kept for the next one), its MCP servers and its folded history (read again from the log on
   * next use). Not while a run or a shell command is in progress: the countdown starts again.
   */
  private async releaseIdle(conversationId: string): Promise<void> {
    const session = this.sessions.peek(conversationId);
    if (!session || session.active || this.sessions.isLoading(conversationId) || this.releasing.has(conversationId)) return;
    // A condensation under way holds the session; the countdown starts again.
    if (session.condensing || session.condenseRequest) return this.armIdleTimer(conversationId);
    const release = (async () => {
      const { released, restore } = await session.suspendShell(Math.round((this.deps.idleTimeoutMs ?? 0) / 1000));
      if (!released || session.active) return this.armIdleTimer(conversationId);
      await this.deps.mcp?.close(conversationId);
      if (this.sessions.peek(conversationId) !== session || session.active) return;
      this.sessions.forget(conversationId);
      if (restore) this.released.set(conversationId, restore);
    })();
    this.releasing.set(conversationId, release);
    try {
      await release;
    } finally {
      this.releasing.delete(conversationId);
    }
  }

  /**
   * `ask_user`: the question is recorded, the conversation waits for input (a promise, nothing
   * polls) until POST /answer or a message answers it, or the run is paused or canceled.
   */
  private async askUser(options: { session: AgentSession; record: ConversationRecord; runId: string; signal: AbortSignal; question: UserQuestion }): Promise<UserAnswer> {
    const { session, record, runId, signal, question } = options;
    signal.throwIfAborted();
    if (session.question) throw new Error('Another question is already waiting for its answer: ask one question at a time.');
    const answered = waitForAnswer(signal);
    // Open before the event is out: a webhook receiver may answer as soon as it sees it.
    const open = { toolCallId: question.toolCallId, runId, answer: answered.answer };
    session.question = open;
    try {
      await this.append(record.id, { kind: 'question', source: 'agent', tool_call_id: question.toolCallId, question: question.question, ...(question.options && { options: question.options }), run_id: runId });
      await this.setStatus(record, 'waiting_for_input', { runId, reason: 'The agent asked a question: answer with POST /answer or a message.' });
      return await answered.promise;
    } finally {
      if (session.question === open) session.question = null;
      if (!signal.aborted && record.status === 'waiting_for_input') await this.setStatus(record, 'running', { runId, reason: 'The question was answered.' });
    }
  }

  /** What subagents started in this run share with it: the conversation, the run's signal, catalog, rules and hooks. */
  private subagentHost(record: ConversationRecord, session: AgentSession, active: NonNullable<AgentSession['active']>): SubagentHost {
    const { run, controller } = active;
    return {
      conversationId: record.id,
      workdir: record.workdir,
      workdirFs: this.deps.workdirFs,
      session,
      run,
      signal: controller.signal,
      catalog: active.catalog,
      llm: this.deps.llm,
      maxDepth: this.maxSubagentDepth,
      settings: () => ({ llm: record.llm!, maxIterations: record.max_iterations_per_run, confirmationMode: record.confirmation_mode }),
      startShell: (child) => child.shell(this.deps.shells, { workdir: record.workdir, env: () => this.deps.shellEnv(record), sandbox: this.deps.conversations.sandboxOf(record) }),
      append: async (event) => (await this.append(record.id, event)).event,
      delta: (text, tags) => this.deps.recorder.delta({ kind: 'message_delta', conversation_id: record.id, run_id: run.id, content_delta: text, ...tags }),
      onUsage: (usage, tags) => this.recordUsage(record, run, usage, tags),
      gate: (tags) => this.gateFor(record, run.id, controller.signal, tags),
      schemasOf: (tools) => this.schemasOf(tools),
      systemPrompt: async (agent, tools) => subagentSystemPrompt({ agent, tools, workdir: record.workdir, secretNames: Object.keys(record.secrets), now: new Date(this.clock.now()), project: await this.projectContext(record), catalog: active.catalog }),
      track: (done) => {
        const tracked = done.catch(() => undefined).finally(() => active.subagents.delete(tracked));
        active.subagents.add(tracked);
      },
    };
  }

  /** The skills, slash commands and subagent definitions a run of this conversation can use (GET /skills shows them). */
  async catalogOf(record: ConversationRecord): Promise<ProjectCatalog> {
    if (!this.deps.catalog) return EMPTY_CATALOG;
    try {
      return await this.deps.catalog(record);
    } catch (error) {
      this.deps.onError?.(error, { conversation_id: record.id, stage: 'catalog' });
      return EMPTY_CATALOG;
    }
  }

  private get maxSubagentDepth(): number {
    return this.deps.maxSubagentDepth ?? 1;
  }

  /** Permission rules (the client's, tightened by the project's) and hooks for one run (or one of its subagents). */
  private gateFor(record: ConversationRecord, runId: string | null, signal: AbortSignal, subagent?: Required<SubagentTags>): ToolGate {
    // The project's settings are read when the first tool call needs them, not before the first LLM turn.
    let project: Promise<Awaited<ReturnType<typeof readProjectPermissions>> | null> | null = null;
    let cached: { key: unknown[]; policy: PermissionPolicy } | null = null;
    // The config may change mid-run (confirmation mode, PUT /config): the policy follows it.
    const policy = async () => {
      project ??= readsProject(record) ? readProjectPermissions(this.deps.projectFiles, record.workdir) : Promise.resolve(null);
      const projectRules = await project;
      const key = [record.permissions, record.confirmation_mode];
      if (!cached || cached.key.some((value, index) => value !== key[index])) {
        cached = { key, policy: new PermissionPolicy({ conversation: record.permissions, project: projectRules, confirmationMode: record.confirmation_mode }) };
      }
      return cached.policy;
    };
    const hooks = new HookRunner({
      hooks: record.hooks ?? {},
      transport: this.deps.hookTransport(record),
      base: { conversation_id: record.id, run_id: runId, cwd: record.workdir },
      signal,
      // Hook events are recorded in call order (the log stores them in the call); a failed write is logged, never left unhandled.
      append: (event) => void this.append(record.id, { ...event, ...subagent }).catch((error: unknown) => this.deps.onError?.(error, { conversation_id: record.id, run_id: runId, stage: 'hook_event' })),
    });
    return new ToolGate({ policy, hooks, workdir: record.workdir, ...(subagent && { subagent: { agent_type: subagent.agent, agent_id: subagent.parent_tool_call_id } }) });
  }

  /** The prompt is rebuilt at every run start; its inputs (workdir, tools, secrets, AGENTS.md, date) may have changed. */
  private async recordSystemPrompt(record: ConversationRecord, session: AgentSession, catalog: ProjectCatalog): Promise<void> {
    const tools = this.offeredTools(record, catalog);
    const project = await this.projectContext(record);
    const content = buildSystemPrompt({ workdir: record.workdir, tools: tools.map((tool) => tool.name), secretNames: Object.keys(record.secrets), now: new Date(this.clock.now()), project, catalog });
    const schemas = this.schemasOf(tools) as unknown as Record<string, unknown>[];
    if (session.history.hasSystemPromptOf(content, schemas)) return;
    await this.append(record.id, { kind: 'system_prompt', source: 'system', content, tools: schemas });
  }

  /** The repository around the workdir and its AGENTS.md/CLAUDE.md (unless `setting_sources` excludes the project). */
  private projectContext(record: ConversationRecord): Promise<ProjectContext> {
    return readProjectContext({ projectFiles: this.deps.projectFiles, workdir: record.workdir, instructions: readsProject(record) });
  }

  private async setStatus(record: Readonly<ConversationRecord>, status: ConversationStatus, options: { runId?: string | null; reason?: string } = {}): Promise<void> {
    this.deps.conversations.setStatus(record.id, status, options.runId ?? null);
    await this.append(record.id, { kind: 'state_update', source: 'system', status, run_id: options.runId ?? null, reason: options.reason ?? null });
  }

  private enabledTools(record: ConversationRecord): ToolDefinition[] {
    return record.tools.map((name) => this.toolsByName.get(name)).filter((tool): tool is ToolDefinition => tool !== undefined);
  }

  /** The enabled tools worth offering: `skill` and `slash_command` only when the project has some, `task` while subagents are allowed. */
  private offeredTools(record: ConversationRecord, catalog: ProjectCatalog): ToolDefinition[] {
    return this.enabledTools(record).filter((tool) => {
      if (tool.name === SKILL_TOOL_NAME) return catalog.skills.length > 0;
      if (tool.name === SLASH_COMMAND_TOOL_NAME) return catalog.commands.length > 0;
      if (tool.name === TASK_TOOL_NAME) return this.maxSubagentDepth > 0;
      return true;
    });
  }

  /** Each tool's schema is derived once: a tool definition never changes. */
  private schemasOf(tools: readonly ToolDefinition[]): LlmToolSchema[] {
    return tools.map((tool) => {
      let schema = toolSchemas.get(tool);
      if (!schema) {
        const { $schema: _ignored, ...parameters } = tool.jsonSchema ?? (z.toJSONSchema(tool.parameters, { io: 'input' }) as Record<string, unknown>);
        schema = { name: tool.name, description: tool.description, parameters };
        toolSchemas.set(tool, schema);
      }
      return schema;
    });
  }

  private toolNameOf(callId: string, session: AgentSession): string {
    return session.history.toolNameOf(callId) ?? 'unknown';
  }
}

function readsProject(record: ConversationRecord): boolean {
  return (record.setting_sources ?? ['project']).includes('project');
}

/** The run settles once its subagents have wound down (they stop with the run's signal), or after a bound. */
async function settleSubagents(active: NonNullable<AgentSession['active']>): Promise<void> {
  if (active.subagents.size === 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.allSettled([...active.subagents]), new Promise((resolve) => (timer = setTimeout(resolve, SUBAGENT_SETTLE_MS)))]);
  clearTimeout(timer);
}

const SUBAGENT_SETTLE_MS = 10_000;

function addUsage(target: Run['usage'], usage: LlmUsage): void {
  target.prompt_tokens += usage.prompt_tokens;
  target.completion_tokens += usage.completion_tokens;
  target.cost += usage.cost;
  target.cached_tokens = (target.cached_tokens ?? 0) + usage.cached_tokens;
  target.reasoning_tokens = (target.reasoning_tokens ?? 0) + usage.reasoning_tokens;
}
