import type * as acp from '@agentclientprotocol/sdk';
import type { AgentContext } from '@agentclientprotocol/sdk';
import type { AgentdClient, Conversation, EventOf, StreamEvent, StreamItem } from '../../client/index.js';
import { EventUpdates } from './event-updates.js';
import { askPermissions } from './permission-prompts.js';
import { messageContent } from './session-inputs.js';

export interface SessionDeps {
  client: AgentdClient;
  /** The editor's side of the connection. */
  editor: AgentContext;
  /** Whether the editor answers `elicitation/create` forms (else a question is a message, answered by the next prompt). */
  elicitation: boolean;
  log: (line: string) => void;
}

interface OpenPrompt {
  runId: string | null;
  cancelled: boolean;
  resolve(reason: acp.StopReason): void;
  reject(error: unknown): void;
}

/** The threshold the usage is shown against when the conversation's condenser has no number of its own. */
const DEFAULT_CONTEXT_TOKENS = 128_000;
/** How long a lost server is waited for before the session gives up its stream (an editor session lasts for hours). */
const RECONNECT_BUDGET_MS = 24 * 60 * 60 * 1000;
const DONE_STATUSES = new Set(['idle', 'finished', 'stuck', 'error', 'paused']);

/**
 * One ACP session: one agentd conversation (the session id is the conversation id), followed on
 * its SSE stream from the last event the editor was sent (`Last-Event-ID` on every reconnect):
 * every persisted event reaches the editor once, in order, across dropped connections and server
 * restarts. A prompt is a message; it is answered when the run it started (or fed) ends.
 */
export class AcpSession {
  readonly id: string;
  private cursor = 0;
  private updates: EventUpdates;
  private readonly following = new AbortController();
  private prompt: OpenPrompt | null = null;
  /** The runs that ended before their prompt knew its run id (a fast run), by id. */
  private readonly ended = new Map<string, EventOf<'state_update'>>();
  /** User messages this bridge sent and has not seen on the stream yet: the editor shows them already. */
  private ownPending = 0;
  private readonly asking = new Set<string>();
  private reconnected = false;
  private cursorWaiters: { seq: number; resolve: () => void }[] = [];

  constructor(private readonly deps: SessionDeps, conversation: Conversation) {
    this.id = conversation.id;
    this.updates = new EventUpdates({ workdir: conversation.workdir, contextTokens: conversation.condenser?.max_tokens ?? DEFAULT_CONTEXT_TOKENS });
  }

  /** Sends the whole history as updates (session/load), then follows live. */
  async replay(): Promise<void> {
    for await (const event of this.deps.client.events.all(this.id)) {
      await this.send(event);
      this.cursor = event.seq;
    }
  }

  /** Follows the stream from the last event sent (the end of the history for a session that was not replayed). */
  async follow(options: { fromEnd: boolean }): Promise<void> {
    if (options.fromEnd) {
      const last = await this.deps.client.events.list(this.id, { order: 'desc', limit: 1 });
      this.cursor = last.items[0]?.seq ?? 0;
    }
    // Answered once the stream is open: the deltas of a prompt sent right after are not missed.
    await new Promise<void>((opened) => {
      void this.followLoop(opened).catch((error: unknown) => {
        this.deps.log(`session ${this.id}: the event stream ended: ${error instanceof Error ? error.message : String(error)}`);
        this.prompt?.reject(error);
        opened();
      });
    });
  }

  close(): void {
    this.following.abort();
    for (const waiter of this.cursorWaiters.splice(0)) waiter.resolve();
    this.prompt?.resolve('cancelled');
  }

  private async followLoop(opened: () => void): Promise<void> {
    const items = this.deps.client.events.streamItems(this.id, {
      after: this.cursor,
      signal: this.following.signal,
      reconnectBudgetMs: RECONNECT_BUDGET_MS,
      onOpen: opened,
      onReconnect: (attempt, cursor) => {
        this.reconnected = true;
        if (attempt === 1) this.deps.log(`session ${this.id}: the event stream broke; resuming after event ${cursor}`);
      },
    });
    for await (const item of items) await this.take(item);
  }

  private async take(item: StreamItem): Promise<void> {
    if (item.cursor !== null && item.cursor <= this.cursor) return;
    const event = item.event;
    const own = event.kind === 'message' && event.source === 'user' && this.ownPending > 0;
    if (own) this.ownPending -= 1;
    else await this.send(event);
    if (item.cursor !== null) {
      this.cursor = item.cursor;
      this.cursorWaiters = this.cursorWaiters.filter((waiter) => (waiter.seq <= this.cursor ? (waiter.resolve(), false) : true));
    }
    if (event.kind === 'state_update') await this.onStatus(event);
    if (event.kind === 'question' && this.deps.elicitation && !event.parent_tool_call_id) void this.askQuestion(event);
  }

  private async send(event: StreamEvent): Promise<void> {
    for (const update of this.updates.of(event)) await this.deps.editor.notify('session/update', { sessionId: this.id, update });
  }

  /** Runs a prompt to the end of its run: the stop reason. */
  async runPrompt(blocks: readonly acp.ContentBlock[]): Promise<acp.StopReason> {
    if (this.prompt) throw new Error('a prompt is already running in this session; cancel it first');
    const content = messageContent(blocks);
    const done = new Promise<acp.StopReason>((resolve, reject) => {
      this.prompt = { runId: null, cancelled: false, resolve, reject };
    });
    const prompt = this.prompt!;
    try {
      // Counted before it is sent: its event may come on the stream before the answer does.
      this.ownPending += 1;
      const accepted = await this.deps.client.messages.send(this.id, { content }).catch((error: unknown) => {
        this.ownPending -= 1;
        throw error;
      });
      if (!accepted.run_id) prompt.resolve('end_turn');
      else this.track(accepted.run_id);
      return await done;
    } finally {
      if (this.prompt === prompt) this.prompt = null;
    }
  }

  /** The prompt follows this run now (its first, or the one an approval or a resume started). */
  private track(runId: string): void {
    if (!this.prompt) return;
    this.prompt.runId = runId;
    const ended = this.ended.get(runId);
    if (ended) void this.onStatus(ended);
  }

  /** session/cancel: pauses the run; the prompt answers `cancelled` once it stopped. */
  async cancel(): Promise<void> {
    const prompt = this.prompt;
    if (!prompt) return;
    prompt.cancelled = true;
    const conversation = await this.deps.client.runs.pause(this.id).catch(() => null);
    // The run's last events (a stopped tool's result, the pause) reach the editor before the answer.
    await this.caughtUp(conversation?.event_count ?? 0);
    prompt.resolve('cancelled');
  }

  /** Resolves once the editor was sent the events up to `seq` (or the session closed). */
  private caughtUp(seq: number): Promise<void> {
    if (this.cursor >= seq || this.following.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => this.cursorWaiters.push({ seq, resolve }));
  }

  private async onStatus(event: EventOf<'state_update'>): Promise<void> {
    if (event.status === 'waiting_for_confirmation') return void this.askPending();
    if (!event.run_id) return;
    const prompt = this.prompt;
    const settles = DONE_STATUSES.has(event.status) || (event.status === 'waiting_for_input' && !this.deps.elicitation);
    if (!settles) return;
    if (!prompt || prompt.runId === null) {
      this.ended.set(event.run_id, event);
      return;
    }
    if (prompt.runId !== event.run_id) return;
    if (prompt.cancelled) return prompt.resolve('cancelled');
    if (event.status !== 'paused') return prompt.resolve(event.status === 'stuck' ? 'max_turn_requests' : 'end_turn');
    const run = await this.deps.client.runs.get(this.id, event.run_id).catch(() => null);
    if (run?.outcome === 'max_iterations') return prompt.resolve('max_turn_requests');
    if ((run?.outcome === 'server_restart' || run?.outcome === 'failover') && this.reconnected) {
      // The server went away mid-run and is back: the turn goes on where it was cut off.
      this.reconnected = false;
      this.deps.log(`session ${this.id}: the server restarted during the run; continuing it`);
      const started = await this.deps.client.runs.start(this.id).catch((error: unknown) => prompt.reject(error));
      if (started) this.track(started.run_id);
      return;
    }
    prompt.resolve('cancelled');
  }

  /** Asks the editor about the actions awaiting approval (again after a load: a request left unanswered stays pending in agentd). */
  async askPending(): Promise<void> {
    try {
      const runId = await askPermissions({ client: this.deps.client, editor: this.deps.editor, sessionId: this.id, asking: this.asking });
      if (runId) this.track(runId);
    } catch (error) {
      this.deps.log(`session ${this.id}: asking for permission failed: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  /** An `ask_user` question as an elicitation form; declined, the question stays open and the prompt ends. */
  private async askQuestion(event: EventOf<'question'>): Promise<void> {
    try {
      const answer: acp.StringPropertySchema = { title: 'Answer', ...(event.options?.length ? { enum: event.options } : {}) };
      const response = await this.deps.editor.request('elicitation/create', {
        mode: 'form',
        sessionId: this.id,
        toolCallId: event.tool_call_id,
        message: event.question,
        requestedSchema: { type: 'object', properties: { answer: { type: 'string', ...answer } }, required: ['answer'] },
      });
      const value = response.action === 'accept' && 'content' in response ? (response.content as Record<string, unknown> | null)?.answer : undefined;
      if (typeof value === 'string' && value) await this.deps.client.runs.answer(this.id, { tool_call_id: event.tool_call_id, content: value });
      else this.prompt?.resolve('end_turn');
    } catch (error) {
      this.deps.log(`session ${this.id}: asking the question failed: ${error instanceof Error ? error.message : String(error)}`);
      this.prompt?.resolve('end_turn');
    }
  }
}
