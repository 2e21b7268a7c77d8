import type { SpendCheck } from '../access/spend-guard.js';
import { systemClock, type Clock } from '../clock.js';
import type { Budget } from '../schemas/budget.js';
import { PriceTable, type ModelPrice } from './price-table.js';
import type { ProjectCatalog } from '../catalog/project-catalog.js';
import type { RunCheckpoints } from '../checkpoints/checkpoint-service.js';
import type { ConversationRecord } from '../conversations/conversation-record.js';
import type { ConversationRuntime } from '../conversations/conversation-service.js';
import type { ConversationStore } from '../conversations/conversation-store.js';
import { ConflictError } from '../errors.js';
import type { EventRecorder } from '../events/event-recorder.js';
import type { HookTransport } from '../hooks/hook-transport.js';
import type { McpRegistry } from '../mcp/mcp-registry.js';
import type { Page } from '../pagination.js';
import type { CondenseBody } from '../schemas/conversation.js';
import type { AgentEvent } from '../schemas/event.js';
import type { ShellFactory } from '../tools/shell-session.js';
import type { ToolDefinition, UserAnswer } from '../tools/tool.js';
import type { ProjectFiles } from '../workspace/project-files.js';
import type { WorkdirFileSystem } from '../workspace/workdir-file-system.js';
import type { AgentSessions } from './agent-sessions.js';
import { CondensationControl } from './condensation-control.js';
import type { ShellParser } from '../permissions/shell-syntax.js';
import { ConversationGates } from './conversation-gates.js';
import type { LlmClient, LlmRetry } from './llm.js';
import { MessageIntake, type TakeMessageOptions } from './message-intake.js';
import { RunBook } from './run-book.js';
import { RunDriver } from './run-driver.js';
import { RunJournal } from './run-journal.js';
import type { Run, RunStore } from './run-record.js';
import { RunRecovery } from './run-recovery.js';
import { SessionLifecycle } from './session-lifecycle.js';
import { SubagentHosts } from './subagent-host.js';
import { ToolOffer } from './tool-offer.js';
import { UserQuestions } from './user-questions.js';

/** Shells started ahead of a first run that may wait unused at the same time (see AgentRuntime.prepare). */
const WARM_SHELLS_MAX = 8;

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
  /** Bash parsed for the permission rules (loaded on first use). */
  shellParser: ShellParser;
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
  /** Models a workdir's agent file may pick besides the conversation's own (AGENTD_SUBAGENT_MODELS; default none). */
  subagentModels?: readonly string[];
  /** Workdir checkpoints before each run and each file-changing tool call. */
  checkpoints?: RunCheckpoints;
  clock?: Clock;
  /** Before each LLM request of a run: the owner's spend limit (core/access/spend-guard.ts). */
  spendCheck?: SpendCheck;
  onError?: (error: unknown, context: Record<string, unknown>) => void;
  /** A failed LLM attempt that will be retried (for the server log, at warn). */
  onLlmRetry?: (retry: LlmRetry, context: { conversation_id: string; run_id: string | null }) => void;
  /** After this long without a run a conversation's shell, MCP servers and history are released (0 or absent: never). */
  idleTimeoutMs?: number;
  /** A conversation was released after its idle timeout: what else holds it in memory lets go (its newest checkpoint). */
  onReleased?: (conversationId: string) => void;
  /** A run that ended in agent_error (for the server log, at error). */
  onRunFailed?: (failure: { code: string; message: string }, context: { conversation_id: string; run_id: string }) => void;
  /** Budgets: the server's default (AGENTD_BUDGET) and the price table's overrides (AGENTD_PRICES_FILE). */
  spending?: { defaultBudget: Budget | null; prices: Readonly<Record<string, ModelPrice>> };
  /** The condensation threshold for models whose context window agentd does not know (AGENTD_CONDENSER_MAX_TOKENS). */
  condenserMaxTokens?: number;
  /** Masks the conversation's secret values in what run records show (the files a run changed, its output). */
  maskText?: (conversationId: string, text: string) => string;
}

/**
 * The agent side of every conversation, as the rest of the server sees it: one facade over the
 * parts that each own one concern (runs, questions, session lifecycle, recovery, run records),
 * wired here once through their constructors.
 */
export class AgentRuntime implements ConversationRuntime {
  private readonly journal: RunJournal;
  private readonly offer: ToolOffer;
  private readonly lifecycle: SessionLifecycle;
  private readonly condensation: CondensationControl;
  private readonly questions: UserQuestions;
  private readonly driver: RunDriver;
  private readonly runBook: RunBook;
  private readonly recovery: RunRecovery;
  private readonly intake: MessageIntake;
  /** Conversations whose shell was started ahead of their first run (see prepare). */
  private readonly warmed = new Set<string>();

  constructor(private readonly deps: AgentRuntimeDeps) {
    const { conversations, sessions, runs, onError } = deps;
    const clock = deps.clock ?? systemClock;
    const journal = (this.journal = new RunJournal({ conversations, recorder: deps.recorder, prices: new PriceTable(deps.spending?.prices), onLlmRetry: deps.onLlmRetry }));
    const offer = (this.offer = new ToolOffer({ tools: deps.tools, catalog: deps.catalog, maxSubagentDepth: deps.maxSubagentDepth, subagentModels: deps.subagentModels, onError }));
    const gates = new ConversationGates({
      hookTransport: deps.hookTransport,
      projectFiles: deps.projectFiles,
      readers: { shellParser: deps.shellParser, resolvePath: (workdir, userPath) => deps.workdirFs.resolve(workdir, userPath, { allowAbsolute: true }) },
      keepProjectPermissions: (id, rules) => conversations.configure(id, { project_permissions: rules }),
      holdProjectPermissions: (id, rules) => conversations.holdProjectPermissions(id, rules),
      append: (id, event) => journal.append(id, event),
      onError,
    });
    const lifecycle = (this.lifecycle = new SessionLifecycle({ sessions, mcp: deps.mcp, idleTimeoutMs: deps.idleTimeoutMs, onReleased: (id) => { deps.runs.release?.(id); deps.onReleased?.(id); }, onError }));
    const condensation = (this.condensation = new CondensationControl({
      llm: deps.llm,
      append: async (id, event) => (await journal.append(id, event)).event,
      recordUsage: (record, run, usage, model) => journal.recordUsage(record, run, usage, {}, model),
      llmEvents: (record, runId) => journal.llmEvents(record, runId),
      gateFor: (record, runId, signal) => gates.gateFor(record, runId, signal),
      serverMaxTokens: deps.condenserMaxTokens,
      ...(onError && { onError }),
    }));
    const questions = (this.questions = new UserQuestions({ conversations, sessions, journal }));
    const subagents = new SubagentHosts({ conversations, llm: deps.llm, workdirFs: deps.workdirFs, projectFiles: deps.projectFiles, shells: deps.shells, shellEnv: deps.shellEnv, journal, gates, offer, clock, condensation });
    const driver = (this.driver = new RunDriver({
      conversations,
      runs,
      sessions,
      llm: deps.llm,
      workdirFs: deps.workdirFs,
      projectFiles: deps.projectFiles,
      shells: deps.shells,
      shellEnv: deps.shellEnv,
      readImage: deps.readImage,
      mcp: deps.mcp,
      checkpoints: deps.checkpoints,
      journal,
      offer,
      gates,
      subagents,
      questions,
      condensation,
      lifecycle,
      clock,
      onError,
      onRunFailed: deps.onRunFailed,
      defaultBudget: deps.spending?.defaultBudget ?? null,
      spendCheck: deps.spendCheck,
    }));
    this.runBook = new RunBook({ conversations, runs, sessions, pause: (id, stopAs) => driver.pause(id, stopAs), ...(deps.maskText && { maskText: deps.maskText }) });
    this.recovery = new RunRecovery({ conversations, runs, journal, session: (id) => lifecycle.session(id), clock });
    this.intake = new MessageIntake({
      session: (id) => lifecycle.session(id),
      onUserMessage: (id, options) => driver.onUserMessage(id, options),
      cancel: (id) => driver.pause(id, 'canceled'),
      startRun: (id) => driver.startRun(id),
      append: (id, event) => journal.append(id, event),
      appendMessage: async (id, message, { startsRun }) => {
        conversations.refuseIfQuarantined(id);
        if (!startsRun) return (await journal.append(id, message)).event;
        // The project's rules the run will keep are saved with the title the message may give the conversation: one save, before the run starts.
        await gates.holdBeforeRun(conversations.record(id));
        try {
          return (await journal.append(id, message)).event;
        } finally {
          conversations.saveHeldRules(id);
        }
      },
    });
  }

  onUserMessage(conversationId: string, options: { run: boolean }): Promise<string | null> {
    return this.driver.onUserMessage(conversationId, options);
  }

  /**
   * A conversation created without a run starts its shell now, in the background, after the
   * request that created it is answered (the spawn holds the event loop for a moment): its first
   * bash call then finds the shell ready instead of waiting for its start (longer still under
   * load). Only for a conversation that can run (an LLM, the
   * bash tool) on a server that releases idle shells (AGENTD_IDLE_TIMEOUT_S): the shell goes
   * like any idle one if no run comes. At most WARM_SHELLS_MAX such shells wait unused at a time,
   * so creating many conversations at once does not start as many sandboxes. The sandbox gives the
   * workdir to the agent's uid before the shell's first command, not at its start: files put into
   * the workdir on the host before the first run are the agent's, as without the early start.
   */
  prepare(conversationId: string): void {
    if (!this.deps.idleTimeoutMs || this.deps.idleTimeoutMs <= 0) return;
    setImmediate(() => void this.warmShell(conversationId).catch(() => undefined));
  }

  private async warmShell(conversationId: string): Promise<void> {
    const { conversations, sessions } = this.deps;
    if (!conversations.has(conversationId)) return;
    const record = conversations.record(conversationId);
    if (!record.llm || !this.driver.usesShell(record)) return;
    // Shells warmed earlier that still wait for their conversation's first run.
    for (const id of this.warmed) {
      const session = sessions.peek(id);
      if (!session || session.active || session.stale || session.history.hasSystemPrompt || !conversations.has(id)) this.warmed.delete(id);
    }
    if (this.warmed.size >= WARM_SHELLS_MAX) return;
    const session = await this.lifecycle.session(conversationId);
    // Deleted (or its workdir moved, its session released) meanwhile: no shell for a session nobody holds.
    if (!conversations.has(conversationId) || sessions.peek(conversationId) !== session || session.active || session.liveShell) return;
    this.warmed.add(conversationId);
    // A start that fails is not reported here: the bash tool reports it when (and if) it is called.
    await this.driver.shellOf(session, record, { ahead: true });
  }

  /** A user message arrives (POST /messages): see MessageIntake for what it does to a run in progress. */
  takeMessage(conversationId: string, options: TakeMessageOptions): Promise<{ event: AgentEvent; runId: string | null }> {
    return this.intake.take(conversationId, options);
  }

  /** POST /condense (see CondensationControl.request). */
  async condenseNow(conversationId: string, body: CondenseBody): Promise<{ run_id: string | null; forgotten_from_seq: number; forgotten_to_seq: number }> {
    const record = this.deps.conversations.record(conversationId);
    return this.condensation.request(await this.lifecycle.session(conversationId), record, body);
  }

  /** Start a run (POST /run, a message, approve, reject). A conflict while one is running. */
  startRun(conversationId: string, options: { approved?: boolean } = {}): Promise<string> {
    return this.driver.startRun(conversationId, options);
  }

  /** Whether a run of the conversation is in progress. */
  isRunning(conversationId: string): boolean {
    return Boolean(this.deps.sessions.peek(conversationId)?.active);
  }

  /** A rewind changed the conversation's history: fold it again now (so a failure shows at once). */
  async refreshHistory(conversationId: string): Promise<void> {
    await this.lifecycle.session(conversationId);
  }

  /** Stop the run at the next safe point (interrupting a running tool). No-op when nothing runs. */
  pause(conversationId: string, stopAs: 'paused' | 'canceled' | 'deleted' | 'shutdown' = 'paused'): Promise<void> {
    return this.driver.pause(conversationId, stopAs);
  }

  cancelRun(conversationId: string, runId: string): Promise<Run> {
    return this.runBook.cancel(conversationId, runId);
  }

  /** Answers the open `ask_user` question (see UserQuestions.answer). */
  answer(conversationId: string, body: { tool_call_id?: string | undefined; content: string }, via: UserAnswer['via'] = 'answer'): { tool_call_id: string; run_id: string } {
    return this.questions.answer(conversationId, body, via);
  }

  /** A user message while a question is open answers it (the message is recorded as that answer). */
  answerWithMessage(conversationId: string, content: string): { tool_call_id: string; run_id: string } | null {
    return this.questions.answerWithMessage(conversationId, content);
  }

  async approve(conversationId: string): Promise<string> {
    this.pendingRecord(conversationId);
    return this.driver.startRun(conversationId, { approved: true });
  }

  async reject(conversationId: string, reason: string | undefined): Promise<string> {
    const record = this.pendingRecord(conversationId);
    for (const action of record.pending_actions) {
      await this.journal.append(conversationId, { kind: 'rejection', source: 'user', tool_call_id: action.tool_call_id, tool_name: action.tool_name, reason: reason ?? '' });
    }
    this.deps.conversations.setPendingActions(conversationId, []);
    await this.journal.setStatus(record, 'idle', { reason: 'actions rejected' });
    return this.driver.startRun(conversationId);
  }

  setConfirmationMode(conversationId: string, enabled: boolean): void {
    this.deps.conversations.record(conversationId);
    this.deps.conversations.configure(conversationId, { confirmation_mode: enabled });
  }

  listRuns(conversationId: string): Run[] {
    return this.runBook.list(conversationId);
  }

  /** A page of the run records, oldest first unless `order` is desc. */
  runsPage(conversationId: string, query: { order: 'asc' | 'desc'; pageId?: string | undefined; limit: number }): Page<Run> {
    return this.runBook.page(conversationId, query);
  }

  getRun(conversationId: string, runId: string): Run {
    return this.runBook.get(conversationId, runId);
  }

  beforeWorkdirChange(conversationId: string): Promise<void> {
    return this.lifecycle.beforeWorkdirChange(conversationId);
  }

  /**
   * The conversation is deleted: its run stops (recorded as deleted), its session, shell, MCP
   * servers and run records go. `awaitShellExit: false`: the shell is killed, its exit not waited for.
   */
  async dispose(conversationId: string, options: { awaitShellExit?: boolean } = {}): Promise<void> {
    await this.lifecycle.forgetReleased(conversationId);
    await this.driver.pause(conversationId, 'deleted');
    await this.lifecycle.close(conversationId, (session) => this.condensation.stop(session), options);
    this.deps.runs.drop(conversationId);
  }

  /**
   * Another instance runs the conversation now (this one lost its lease, or takes it back and
   * drops what it held from before): the run here stops (fenced out, it can record nothing
   * more), and the session goes with its shell, MCP servers and idle countdown. Forgetting the
   * session alone left its shell running (a sandbox in a workdir another instance now works
   * in) until this server exited. The records stay: they are the holder's to change.
   */
  async handOver(conversationId: string): Promise<void> {
    await this.lifecycle.forgetReleased(conversationId);
    await this.driver.pause(conversationId, 'shutdown').catch(() => undefined);
    await this.lifecycle.close(conversationId, (session) => this.condensation.stop(session));
  }

  /**
   * Shutdown: pause every run (recorded as events), then close every shell. `exiting`: the
   * process exits right after, and the shells are killed then by the shell factory
   * (killAllForExit), with nothing waiting for their exits; they are left open here. Without
   * that method in the factory, they are closed here all the same.
   */
  async stopAll(options: { exiting?: boolean } = {}): Promise<void> {
    this.lifecycle.stopTimers();
    const sessions = this.deps.sessions;
    await Promise.all(sessions.all().filter((s) => s.active).map((s) => this.driver.pause(s.conversationId, 'shutdown')));
    await Promise.all(sessions.all().map((s) => this.condensation.stop(s)));
    await this.lifecycle.closeAll({ shells: !(options.exiting && this.deps.shells.killAllForExit) });
  }

  /** After a restart: a conversation that was running comes back paused, its open tool calls closed. */
  recoverAfterRestart(): Promise<void> {
    return this.recovery.recoverAfterRestart();
  }

  /**
   * A conversation whose run was cut off (this server restarted, or the instance running it
   * died): its open tool calls are closed and the run is marked paused. Returns whether there
   * was a run to recover.
   */
  recover(conversationId: string, outcome: 'server_restart' | 'failover'): Promise<boolean> {
    return this.recovery.recover(conversationId, outcome);
  }

  /** The skills, slash commands and subagent definitions a run of this conversation can use (GET /skills shows them). */
  catalogOf(record: ConversationRecord): Promise<ProjectCatalog> {
    return this.offer.catalogOf(record);
  }

  /** The conversation, when actions are waiting for confirmation; a conflict otherwise. */
  private pendingRecord(conversationId: string): ConversationRecord {
    const record = this.deps.conversations.record(conversationId);
    if (record.status !== 'waiting_for_confirmation' || record.pending_actions.length === 0) {
      throw new ConflictError('no_pending_actions', 'No actions are waiting for confirmation.');
    }
    return record;
  }
}
