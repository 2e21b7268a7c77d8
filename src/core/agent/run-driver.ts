import type { SpendCheck } from '../access/spend-guard.js';
import { randomUUID } from 'node:crypto';
import type { RunCheckpoints } from '../checkpoints/checkpoint-service.js';
import { EMPTY_CATALOG, type ProjectCatalog } from '../catalog/project-catalog.js';
import { isoTimestamp, type Clock } from '../clock.js';
import { afterThisTurn } from '../after-this-turn.js';
import type { ConversationRecord } from '../conversations/conversation-record.js';
import type { ConversationStore } from '../conversations/conversation-store.js';
import { ConflictError, DatabaseUnavailableError, StorageFullError, UnprocessableError } from '../errors.js';
import type { McpRegistry } from '../mcp/mcp-registry.js';
import type { ShellFactory } from '../tools/shell-session.js';
import { TASK_TOOL_NAME } from '../tools/task.js';
import type { ToolDefinition } from '../tools/tool.js';
import type { ProjectFiles } from '../workspace/project-files.js';
import type { WorkdirFileSystem } from '../workspace/workdir-file-system.js';
import type { ActiveRun, AgentSession } from './agent-session.js';
import type { AgentSessions } from './agent-sessions.js';
import type { CondensationControl } from './condensation-control.js';
import type { ConversationGates } from './conversation-gates.js';
import { withFallbackKeys } from './fallback-keys.js';
import { runSpendChecks } from './budget-guard.js';
import type { Budget } from '../schemas/budget.js';
import { LlmError, type LlmClient, type LlmToolSchema } from './llm.js';
import type { LlmRequestEvents } from './llm-request-events.js';
import type { RunOutcome } from './run-context.js';
import type { RunJournal } from './run-journal.js';
import { executeRun } from './run-loop.js';
import type { Run, RunStore } from './run-record.js';
import type { SessionLifecycle } from './session-lifecycle.js';
import { settleRun } from './settle-run.js';
import { settleSubagents, type SubagentHosts } from './subagent-host.js';
import { runSubagent } from './subagent-runner.js';
import { readProjectContext } from './project-instructions.js';
import { buildSystemPrompt } from './system-prompt.js';
import { readsProject, type ToolOffer } from './tool-offer.js';
import { TurnInterrupts } from './turn-interrupts.js';
import type { UserQuestions } from './user-questions.js';
import { zeroUsage } from '../schemas/usage.js';

export interface RunDriverDeps {
  conversations: ConversationStore;
  /** Before each LLM request of a run: the owner's spend limit (core/access/spend-guard.ts). */
  spendCheck?: SpendCheck | undefined;
  runs: RunStore;
  sessions: AgentSessions;
  llm: LlmClient;
  /** The workdirs' files for the tools (every path pinned inside the workdir). */
  workdirFs: WorkdirFileSystem;
  /** The project's AGENTS.md/CLAUDE.md for the system prompt. */
  projectFiles: ProjectFiles;
  shells: ShellFactory;
  shellEnv: (record: ConversationRecord) => Record<string, string>;
  readImage?: ((conversationId: string, path: string) => Promise<string>) | undefined;
  mcp?: McpRegistry | undefined;
  checkpoints?: RunCheckpoints | undefined;
  journal: RunJournal;
  offer: ToolOffer;
  gates: ConversationGates;
  subagents: SubagentHosts;
  questions: UserQuestions;
  condensation: CondensationControl;
  lifecycle: SessionLifecycle;
  clock: Clock;
  onError?: ((error: unknown, context: Record<string, unknown>) => void) | undefined;
  onRunFailed?: ((failure: { code: string; message: string }, context: { conversation_id: string; run_id: string }) => void) | undefined;
  /** The budget of conversations without their own (AGENTD_BUDGET). */
  defaultBudget?: Budget | null;
}

/**
 * One run at a time per conversation, owned by a lock with an AbortController: started (a
 * conflict while one is running), driven through executeRun with the conversation's tools,
 * gate and shell, stopped at the next safe point, and settled as events and state.
 */
export class RunDriver {
  constructor(private readonly deps: RunDriverDeps) {}

  /** A user message was appended: start a run unless one is going (it takes the message), `run` is false, or the conversation may not run now. */
  async onUserMessage(conversationId: string, options: { run: boolean }): Promise<string | null> {
    const session = await this.deps.lifecycle.session(conversationId);
    if (session.active) return session.active.run.id;
    const record = this.deps.conversations.record(conversationId);
    if (!options.run || record.status === 'waiting_for_confirmation' || this.deps.checkpoints?.isRewinding(conversationId)) return null;
    return this.startRun(conversationId);
  }

  /** Start a run (POST /run, a message, approve, reject). A conflict while one is running. */
  async startRun(conversationId: string, options: { approved?: boolean } = {}): Promise<string> {
    const { conversations, runs, journal, clock } = this.deps;
    const record = conversations.record(conversationId);
    const session = await this.deps.lifecycle.session(conversationId);
    if (session.active) throw new ConflictError('run_in_progress', 'A run is already in progress for this conversation.', { run_id: session.active.run.id });
    if (this.deps.checkpoints?.isRewinding(conversationId)) throw new ConflictError('rewind_in_progress', 'A rewind of this conversation is under way: start the run once it is done.');
    if (!record.llm) throw new UnprocessableError('llm_not_configured', 'This conversation has no LLM: set `llm` on create or with PUT /config (or AGENTD_LLM_MODEL on the server).');
    if (record.status === 'waiting_for_confirmation' && !options.approved) {
      throw new ConflictError('confirmation_pending', 'Actions are waiting for confirmation: approve or reject them first.', { pending_actions: record.pending_actions.length });
    }
    const approved = options.approved ? record.pending_actions : [];
    const now = isoTimestamp(clock.now());
    const run: Run = { id: randomUUID(), conversation_id: conversationId, status: 'running', started_at: now, ended_at: null, iterations: 0, usage: zeroUsage(), outcome: null, error: null };
    runs.save(run);
    const before = { status: record.status, pending_actions: record.pending_actions };
    const firstRun = !session.history.hasSystemPrompt;
    // The lock is taken before anything is awaited: a second start now gets a conflict, and a pause waits for this run.
    const controller = new AbortController();
    let settled!: () => void;
    const inputFromSeq = session.history.firstUnansweredUserSeq ?? session.history.lastSeq + 1;
    const active: ActiveRun = { run, controller, interrupts: new TurnInterrupts(), inputFromSeq, stopAs: null, done: new Promise<void>((resolve) => (settled = resolve)), catalog: EMPTY_CATALOG, subagents: new Set() };
    session.active = active;
    try {
      await journal.startRunning(record, run.id);
    } catch (error) {
      // The run could not start (e.g. the disk is full): the conversation stays as it was.
      session.active = null;
      settled();
      try {
        conversations.restore(conversationId, before);
        runs.save({ ...run, status: 'failed', ended_at: isoTimestamp(clock.now()), outcome: 'error', error: { code: (error as { code?: string }).code ?? 'internal_error', message: 'The run could not start.' } });
      } catch {
        // still failing: a restart finds the run running and pauses it
      }
      throw error;
    }
    // The project's catalog is read while the request that started the run is answered; the run waits for it before its prompt.
    const catalog = this.deps.offer.catalogOf(record);
    void this.drive({ session, record, active, approved, firstRun, catalog }).finally(settled);
    return run.id;
  }

  /** The conversation's shell: the running one, the one starting, or one started now (`ahead`: before the conversation's first run). */
  shellOf(session: AgentSession, record: ConversationRecord, options: { ahead?: boolean } = {}): ReturnType<AgentSession['shell']> {
    return session.shell(this.deps.shells, { workdir: record.workdir, env: () => this.deps.shellEnv(record), sandbox: this.deps.conversations.sandboxOf(record), ...(options.ahead && { ahead: true }) });
  }

  /** Whether the conversation's runs are offered the bash tool (and so need its shell). */
  usesShell(record: ConversationRecord): boolean {
    return this.deps.offer.enabled(record).some((tool) => tool.name === 'bash');
  }

  /** Stop the run at the next safe point (interrupting a running tool). No-op when nothing runs. */
  async pause(conversationId: string, stopAs: NonNullable<ActiveRun['stopAs']> = 'paused'): Promise<void> {
    this.deps.conversations.record(conversationId);
    const active = this.deps.sessions.peek(conversationId)?.active;
    if (!active) return;
    active.stopAs = stopAs;
    active.controller.abort(new Error(stopAs));
    await active.done;
  }

  private async drive(options: { session: AgentSession; record: ConversationRecord; active: ActiveRun; approved: ConversationRecord['pending_actions']; firstRun: boolean; catalog: Promise<ProjectCatalog> }): Promise<void> {
    const { session, record, active, approved, firstRun, catalog } = options;
    const { conversations, journal, offer, mcp } = this.deps;
    const { run, controller } = active;
    // Read at the start of the run, after the request that started it was answered: the catalog decides which of them are offered.
    const builtins: ToolDefinition[] = [];
    // One map and one schema list for the run, updated in place when an MCP server's tools change.
    const toolMap = new Map<string, ToolDefinition>();
    const toolSchemas: LlmToolSchema[] = [];
    const refreshTools = () => {
      const tools = [...builtins, ...(mcp?.tools(record.id) ?? [])];
      toolMap.clear();
      for (const tool of tools) toolMap.set(tool.name, tool);
      toolSchemas.splice(0, toolSchemas.length, ...offer.schemasOf(tools));
    };
    let unsubscribe = () => {};
    const shell = () => this.shellOf(session, record);
    // The shell starts while the LLM thinks, so the first bash call finds it ready; after this
    // turn of the event loop (afterThisTurn), so the request that started the run is answered and
    // the run's first LLM request written first. A start that fails here is not this run's error:
    // the bash tool reports it when (and if) it is called.
    if (this.usesShell(record)) {
      afterThisTurn(() => {
        if (!controller.signal.aborted) shell().catch(() => {});
      });
    }
    let outcome: RunOutcome;
    try {
      // After the request that started the run was answered: the prompt reads AGENTS.md and git.
      active.catalog = await catalog;
      builtins.push(...offer.offered(record, active.catalog));
      await this.recordSystemPrompt(record, session, active.catalog);
      if (mcp?.configured(record)) {
        await mcp.prepare(record);
        unsubscribe = mcp.onToolsChanged(record.id, refreshTools);
        // A server a policy refused is said in the log, not only in GET /mcp: the client sees why its tools are missing.
        for (const refusal of mcp.refusals(record.id)) {
          await journal.append(record.id, { kind: 'mcp_refused', source: 'system', server: refusal.name, config_source: refusal.source, reason: refusal.reason, run_id: run.id });
        }
      }
      refreshTools();
      // The first LLM turn does not wait for it (nor does it start before the turn's request); the first file-changing tool call waits.
      const checkpoints = this.deps.checkpoints;
      void checkpoints?.atRunStart(record, run.id).catch(() => {});
      const gate = this.deps.gates.gateFor(record, run.id, controller.signal);
      this.deps.gates.readAhead(record);
      // A condensation started before this run (POST /condense while idle) ends first.
      await session.condensing?.done;
      // One routing state for the run's requests, its condensations' included (a `turn` scope's stay holds for both).
      const llmEvents: LlmRequestEvents = { ...journal.llmEvents(record, run.id), routing: { turn: 0 } };
      const checks = runSpendChecks({
        budget: () => record.budget ?? this.deps.defaultBudget ?? null,
        spend: () => ({ run: run.usage, conversation: conversations.record(record.id).usage }),
        ownerSpend: this.deps.spendCheck && (() => this.deps.spendCheck!(record)),
      });
      const subagents = this.deps.subagents.hostFor(record, { session, active, checks });
      outcome = await executeRun({
        condenser: this.deps.condensation.forRun({ session, record, run, gate, signal: controller.signal, events: llmEvents }),
        interrupts: active.interrupts,
        gate,
        sessionStart: firstRun,
        conversationId: record.id,
        run,
        signal: controller.signal,
        history: session.history,
        llm: this.deps.llm,
        settings: () => ({ llm: withFallbackKeys(record.llm!, record.secrets), maxIterations: record.max_iterations_per_run, confirmationMode: record.confirmation_mode }),
        tools: toolMap,
        toolSchemas,
        toolContext: {
          conversationId: record.id,
          workdir: record.workdir,
          workdirFs: this.deps.workdirFs,
          signal: controller.signal,
          state: session.toolState,
          shell,
          network: conversations.sandboxOf(record).network,
          askUser: (question) => this.deps.questions.ask({ session, record, runId: run.id, signal: controller.signal, question }),
          catalog: active.catalog,
          ...(toolMap.has(TASK_TOOL_NAME) && { runSubagent: (request) => runSubagent(subagents, toolMap, 0, request) }),
        },
        ...(this.deps.readImage && { readImage: (path: string) => this.deps.readImage!(record.id, path) }),
        append: async (event) => (await journal.append(record.id, event)).event,
        delta: (text) => journal.delta(record.id, run.id, text),
        reasoningDelta: (text) => journal.reasoningDelta(record.id, run.id, text),
        onUsage: (usage, model) => journal.recordUsage(record, run, usage, {}, model),
        ...llmEvents,
        ...checks,
        onIteration: () => {
          run.iterations += 1;
          this.deps.runs.save(run);
        },
        setPendingActions: (actions) => conversations.setPendingActions(record.id, actions),
        approved,
        ...(checkpoints && { beforeTool: (call: { name: string; args: Record<string, unknown> }) => checkpoints.beforeTool(record, run.id, call) }),
      });
    } catch (error) {
      if (controller.signal.aborted) outcome = { kind: 'aborted' };
      else if (error instanceof DatabaseUnavailableError) outcome = { kind: 'database_unavailable' };
      else if (error instanceof LlmError) outcome = { kind: 'error', code: error.code, message: error.message, ...(error.more.details && { details: error.more.details }) };
      else if (error instanceof StorageFullError) outcome = { kind: 'error', code: error.code, message: error.message };
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
        // Cut off by the database: its end checkpoint is not taken (it waits on what the outage holds up); the next run's start covers the files.
        const filesChanged = outcome.kind === 'database_unavailable' ? null : await this.deps.checkpoints?.atRunEnd(record, run.id);
        if (filesChanged) run.files_changed = filesChanged;
        const settle = () => settleRun({ outcome, active, record, session, clock: this.deps.clock, append: (event) => journal.append(record.id, event), saveRun: (r) => this.deps.runs.save(r), setStatus: (status, opts) => journal.setStatus(record, status, opts) });
        await (outcome.kind === 'database_unavailable' ? untilReachable(settle) : settle());
      }
    } catch (error) {
      // Recording the end failed (e.g. the disk is full): the lock must still be released, and
      // the conversation must not look running. Its state on disk catches up with the next save
      // (a restart before that finds the run running and pauses it).
      this.deps.onError?.(error, { conversation_id: record.id, run_id: run.id, stage: 'settle' });
      conversations.failRunning(record.id);
    } finally {
      session.active = null;
      this.deps.lifecycle.armIdleTimer(record.id);
    }
    // A POST /condense the run did not get to (it ended first) is done now.
    if (active.stopAs !== 'deleted' && active.stopAs !== 'shutdown') this.deps.condensation.afterRun(session, record);
    // The history counts with what the run added (older histories may go to stay in budget).
    this.deps.sessions.use(session);
  }

  /** The prompt is rebuilt at every run start; its inputs (workdir, tools, secrets, AGENTS.md, date) may have changed. */
  private async recordSystemPrompt(record: ConversationRecord, session: AgentSession, catalog: ProjectCatalog): Promise<void> {
    const tools = this.deps.offer.offered(record, catalog);
    const project = await readProjectContext({ projectFiles: this.deps.projectFiles, workdir: record.workdir, instructions: readsProject(record) });
    const content = buildSystemPrompt({ workdir: record.workdir, tools: tools.map((tool) => tool.name), secretNames: Object.keys(record.secrets), now: new Date(this.deps.clock.now()), project, catalog });
    const schemas = this.deps.offer.schemasOf(tools) as unknown as Record<string, unknown>[];
    if (session.history.hasSystemPromptOf(content, schemas)) return;
    await this.deps.journal.append(record.id, { kind: 'system_prompt', source: 'system', content, tools: schemas });
  }
}

/** Retries `work` (whose steps stand once done: an event appended is not appended again) while the database is unreachable, for a bounded time. */
async function untilReachable(work: () => Promise<void>, attempts = DATABASE_RETRIES): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (!(error instanceof DatabaseUnavailableError) || attempt >= attempts) throw error;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }
}

/** How many seconds a run cut off by a database outage waits for it to come back to record that it paused. */
const DATABASE_RETRIES = 600;
