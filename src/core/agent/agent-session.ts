import type { ProjectCatalog } from '../catalog/project-catalog.js';
import type { EventLog } from '../events/event-log.js';
import type { AgentEvent } from '../schemas/event.js';
import type { ShellCreateOptions, ShellFactory, ShellSession } from '../tools/shell-session.js';
import type { UserAnswer } from '../tools/tool.js';
import { TASK_LIST_STATE_KEY, TASK_TRACKER_TOOL_NAME, restoreTaskList } from '../tools/task-tracker.js';
import { ConversationHistory } from './conversation-history.js';
import type { LlmMessageCodec } from './llm.js';
import type { Run } from './run-record.js';
import { liveRanges, type HistoryRewind } from './rewound-view.js';
import type { TurnInterrupts } from './turn-interrupts.js';

export interface OpenQuestion {
  toolCallId: string;
  runId: string;
  answer(answer: UserAnswer): void;
}

export interface ActiveRun {
  run: Run;
  controller: AbortController;
  /** Messages sent with multitask_strategy `interrupt` stop the step in progress. */
  interrupts: TurnInterrupts;
  /** Where the run's input starts in the log: what a rollback takes out of the LLM history. */
  inputFromSeq: number;
  /** How an abort is recorded: pause, cancel of the run, or the conversation going away. */
  stopAs: 'paused' | 'canceled' | 'deleted' | 'shutdown' | null;
  done: Promise<void>;
  /** What the project offers this run (skills, commands, subagents), read at its start. */
  catalog: ProjectCatalog;
  /** Subagents still winding down: the run settles after them. */
  subagents: Set<Promise<unknown>>;
}

/**
 * What the server holds for one conversation between requests: the LLM's view of it, the
 * persistent shell, tool state and the run in progress (at most one).
 */
export class AgentSession {
  history: ConversationHistory;
  readonly toolState = new Map<string, unknown>();
  /** Conversation rewinds seen so far: the history is the view they leave (see rewound-view.ts). */
  private rewinds: HistoryRewind[] = [];
  /**
   * The history is folded again before it is used (see AgentSessions.get): a rewind was appended,
   * or the history was given back to keep memory within its budget (see releaseHistory).
   */
  stale = false;
  active: ActiveRun | null = null;
  /** The `ask_user` question the active run waits on (at most one). */
  question: OpenQuestion | null = null;
  /** A POST /condense waiting for the running run's next LLM request. */
  condenseRequest: { instructions?: string | undefined } | null = null;
  /** A condensation started while no run was going: a run that starts meanwhile waits for it. */
  condensing: { done: Promise<void>; controller: AbortController } | null = null;
  /**
   * Subagents' sessions by the id of the `task` call that runs them (at any depth): their events
   * fold there, never into `history`. One leaves when its task call is answered; those left after
   * a fold are subagents a restart interrupted.
   */
  readonly children = new Map<string, AgentSession>();
  /** A subagent's name (its sessions only). */
  agent: string | null = null;
  private shellSession: ShellSession | null = null;
  private starting: Promise<ShellSession> | null = null;
  /** The shell was started ahead of the first run, and no run has asked for it yet. */
  private startedAheadOnly = false;
  /** The state of the shell an earlier session stopped while idle: the next shell restores it. */
  restore: ShellCreateOptions['restore'];
  /** Events appended while the log is being folded in: applied after it (the fold skips what it saw). */
  private held: AgentEvent[] | null = [];

  /** How the history keeps its messages: the LLM client's codec. */
  private readonly codec: LlmMessageCodec | undefined;

  constructor(
    readonly conversationId: string,
    options: { shellId?: string; agent?: string; codec?: LlmMessageCodec | undefined } = {},
  ) {
    this.codec = options.codec;
    this.history = new ConversationHistory(this.codec);
    this.shellId = options.shellId;
    if (options.agent !== undefined) {
      // A subagent's session starts empty: nothing to fold in.
      this.agent = options.agent;
      this.held = null;
    }
  }

  private readonly shellId: string | undefined;

  /** Fold the whole log in once; later events arrive through `receive` (see AgentSessions.read). */
  async load(log: EventLog): Promise<void> {
    let cursor = 0;
    for (;;) {
      const page = await log.read(this.conversationId, { order: 'asc', cursorSeq: cursor, limit: 1000 });
      if (page.length === 0) break;
      for (const { event } of page) {
        if (event.kind === 'rewind' && event.conversation) await this.rewindTo(log, { at: event.seq, to: event.to_seq });
        else this.fold(event);
      }
      cursor = page[page.length - 1]!.event.seq;
    }
    const held = this.held ?? [];
    this.held = null;
    for (const event of held) if (!this.route(event)) this.history.apply(event);
    this.history.settlePrompts();
  }

  /** Fold the log again (after a rewind), keeping the shell and the run state. */
  async reload(log: EventLog): Promise<void> {
    this.clearHistory();
    this.held = [];
    this.stale = false;
    await this.load(log);
  }

  /**
   * Gives back the folded history (to keep the memory of histories within their budget); it is
   * folded from the log again at next use, as after an idle release. The shell stays. Only while
   * nothing uses it: no run, condensation, question or subagent.
   */
  releaseHistory(): boolean {
    if (!this.releasable) return false;
    this.clearHistory();
    this.stale = true;
    return true;
  }

  /** What a fold builds goes: the history, the task list it restored and the rewinds it saw. */
  private clearHistory(): void {
    this.history = new ConversationHistory(this.codec);
    this.toolState.delete(TASK_LIST_STATE_KEY);
    this.rewinds = [];
  }

  /**
   * Nothing uses the history now, and it was folded in (see releaseHistory). Calls left open (a
   * restart's recovery closes them, reading their names) keep it too.
   */
  private get releasable(): boolean {
    return this.active === null && this.condensing === null && this.condenseRequest === null && this.question === null && this.children.size === 0 && this.held === null && this.agent === null && !this.history.hasOpenCalls;
  }

  private fold(event: AgentEvent): void {
    if (this.route(event)) return;
    this.history.apply(event);
    // The task list lives in events: the last task_tracker observation carries all of it.
    if (event.kind === 'observation' && event.tool_name === TASK_TRACKER_TOOL_NAME && !event.is_error) {
      const tasks = restoreTaskList(event.data);
      if (tasks) this.toolState.set(TASK_LIST_STATE_KEY, tasks);
    }
  }

  /** A conversation rewind: the history becomes the events of the view it goes back to. */
  private async rewindTo(log: EventLog, rewind: HistoryRewind): Promise<void> {
    this.rewinds.push(rewind);
    this.history = new ConversationHistory(this.codec);
    this.toolState.delete(TASK_LIST_STATE_KEY);
    for (const [from, to] of liveRanges(this.rewinds, rewind.at + 1)) {
      let cursor = from - 1;
      while (cursor < to) {
        const page = await log.read(this.conversationId, { order: 'asc', cursorSeq: cursor, limit: Math.min(1000, to - cursor) });
        if (page.length === 0) break;
        for (const { event } of page) if (event.seq <= to && event.kind !== 'rewind') this.fold(event);
        cursor = page[page.length - 1]!.event.seq;
      }
    }
    // Later events are folded on top: the seq check of the history must not skip them.
    this.history.lastSeq = rewind.at;
  }

  /** An event was just appended to this conversation. */
  receive(event: AgentEvent): void {
    if (event.kind === 'rewind' && event.conversation) this.stale = true;
    if (this.held) this.held.push(event);
    else if (!this.route(event)) this.history.apply(event);
  }

  /** A subagent's event goes to its session (true); a task call answered closes its subagent's. */
  private route(event: AgentEvent): boolean {
    if (event.kind === 'observation' || event.kind === 'rejection') this.children.delete(event.tool_call_id);
    if (event.parent_tool_call_id !== undefined) {
      let child = this.children.get(event.parent_tool_call_id);
      if (!child) {
        child = new AgentSession(this.conversationId, { agent: event.agent ?? 'unknown', codec: this.codec });
        this.children.set(event.parent_tool_call_id, child);
      }
      child.history.apply(event);
      return true;
    }
    return false;
  }

  /**
   * The conversation's shell, started on first use (and again if it was closed). `ahead`: started
   * before the conversation's first run (see ShellCreateOptions.ahead); until a run asks for it,
   * an idle release closes it without keeping a state to restore (the next run is not told).
   */
  shell(factory: ShellFactory, options: { workdir: string; env: () => Record<string, string>; sandbox?: { network: boolean | 'host' }; ahead?: boolean }): Promise<ShellSession> {
    this.startedAheadOnly = options.ahead === true && (this.startedAheadOnly || (!this.shellSession && !this.starting));
    if (this.shellSession) return Promise.resolve(this.shellSession);
    if (!this.starting) {
      this.starting = factory
        .create({ conversationId: this.conversationId, ...(this.shellId && { shellId: this.shellId }), workdir: options.workdir, env: options.env(), ...(options.sandbox && { sandbox: options.sandbox }), ...(this.restore && { restore: this.restore }), ...(options.ahead && { ahead: true }) })
        .then((shell) => {
          this.shellSession = shell;
          this.restore = undefined;
          return shell;
        })
        .finally(() => {
          this.starting = null;
        });
    }
    return this.starting;
  }

  get liveShell(): ShellSession | null {
    return this.shellSession;
  }

  /** The shell once a start under way has finished (null when there is none, or its start failed). */
  async shellStarted(): Promise<ShellSession | null> {
    if (this.shellSession || !this.starting) return this.shellSession;
    return this.starting.catch(() => null);
  }

  /**
   * Idle: the shell records its state and stops (suspend). False, with the shell left running,
   * while it runs a command. The state is returned for the next session's shell.
   */
  async suspendShell(idleSeconds: number): Promise<{ released: boolean; restore: ShellCreateOptions['restore'] }> {
    const shell = this.shellSession;
    if (shell?.suspend && !this.startedAheadOnly) {
      const state = await shell.suspend();
      if (state === null) return { released: false, restore: this.restore };
      if (this.shellSession === shell) this.shellSession = null;
      this.restore = { state, idleSeconds };
    }
    await this.closeShell();
    return { released: true, restore: this.restore };
  }

  /** Closes the shell, one still starting included (it would otherwise outlive a workdir change). */
  async closeShell(): Promise<void> {
    const starting = this.starting;
    const shell = this.shellSession;
    this.shellSession = null;
    await shell?.close();
    if (starting) {
      const started = await starting.catch(() => null);
      if (started && this.shellSession === started) this.shellSession = null;
      await started?.close();
    }
  }
}
