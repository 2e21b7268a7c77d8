import type { StreamItem, StreamOptions } from './event-stream.js';
import type * as T from './types.js';
import type { AgentEvent, Conversation, ConversationStatus, CreateConversationInput, EventOf, PendingAction, StreamEvent, Usage } from './types.js';

/** The calls a query makes: AgentdClient has them (declared here so that the client and its helpers do not import each other). */
export interface QueryClient {
  conversations: { get(id: string): Promise<Conversation>; create(body: CreateConversationInput): Promise<Conversation> };
  events: { list(id: string, query: T.EventListQuery): Promise<T.EventPage>; streamItems(id: string, options: StreamOptions): AsyncGenerator<StreamItem> };
  messages: { send(id: string, body: T.SendMessageInput): Promise<T.MessageAccepted> };
  runs: {
    start(id: string): Promise<T.RunStarted>;
    pause(id: string): Promise<Conversation>;
    approve(id: string): Promise<T.RunStarted>;
    reject(id: string, body: T.RejectInput): Promise<T.RunStarted>;
    answer(id: string, body: T.AnswerInput): Promise<T.AnswerAccepted>;
    get(id: string, runId: string): Promise<T.Run>;
  };
}

/** What to do with actions awaiting approval: `leave` ends the query with them still pending. */
export type ApprovalDecision = 'approve' | 'reject' | { reject: string } | 'leave';

export interface QueryOptions extends Omit<CreateConversationInput, 'initial_message' | 'run'> {
  /** The user message. Without one, the conversation's run is started (or, when it waits for approval, decided). */
  prompt?: string;
  /** Resume this conversation instead of creating one (creation fields are then ignored). */
  conversation_id?: string;
  /** Aborting pauses the run (`POST /pause`); the query ends once the run says it paused. */
  signal?: AbortSignal;
  /**
   * Asked when the run stops for approval (confirmation mode). Without it, the query ends with
   * status `waiting_for_confirmation`.
   */
  onApproval?: (pending: PendingAction[], conversation: Conversation) => ApprovalDecision | Promise<ApprovalDecision>;
  /**
   * Asked when the agent calls `ask_user`: the text returned is the answer (POST /answer). Without
   * it, the query ends with status `waiting_for_input`.
   */
  onQuestion?: (question: EventOf<'question'>, conversation: Conversation) => string | Promise<string>;
  /** Called with the conversation id once it is known (before any event). */
  onConversation?: (conversation: Conversation) => void;
  /** `run()` only: called with each event as it arrives (progress while the run goes on). */
  onEvent?: (event: StreamEvent) => void;
  /** How long a broken stream keeps trying to resume (default 60 s). */
  reconnectBudgetMs?: number;
  /** Called before each attempt to resume a broken stream. */
  onReconnect?: (attempt: number, cursor: number) => void;
}

export interface RunResult {
  conversation_id: string;
  /** The run ids this query followed (one, or more when approvals continued it). */
  run_ids: string[];
  /** The conversation's status when the run ended: `finished`, `idle` (answered), `paused`, `waiting_for_confirmation`, `waiting_for_input`, `error`, `stuck`. */
  status: ConversationStatus;
  /** The agent's last answer: its last message, or what it passed to `finish`. */
  final_text: string | null;
  /** The run's structured output (when the message asked for an `output_schema`), else null. */
  output: unknown;
  /** Tokens and cost of the runs this query followed. */
  usage: Usage;
  /** The error that ended the run, when it ended in `error`. */
  error: { code: string; message: string } | null;
  /** Every event of the query, deltas included, in order. */
  events: StreamEvent[];
}

const TERMINAL: ReadonlySet<string> = new Set(['idle', 'finished', 'paused', 'waiting_for_confirmation', 'waiting_for_input', 'error', 'stuck']);

/**
 * The events of one run (deltas included), from the user message to the run's end: a stream
 * opened before the message is sent, so nothing is missed, which resumes by itself after a
 * dropped connection.
 */
export async function* query(client: QueryClient, options: QueryOptions): AsyncGenerator<StreamEvent, void, undefined> {
  const { prompt, conversation_id, signal, onApproval, onQuestion, onConversation, onEvent: _onEvent, reconnectBudgetMs, onReconnect, ...create } = options;
  const conversation = conversation_id ? await client.conversations.get(conversation_id) : await client.conversations.create(create);
  onConversation?.(conversation);
  const id = conversation.id;
  const last = await client.events.list(id, { order: 'desc', limit: 1 });
  const after = last.items[0]?.seq ?? 0;

  const streamAbort = new AbortController();
  let opened!: () => void;
  const open = new Promise<void>((resolve) => (opened = resolve));
  const items = client.events.streamItems(id, { after, signal: streamAbort.signal, onOpen: () => opened(), ...(reconnectBudgetMs !== undefined ? { reconnectBudgetMs } : {}), ...(onReconnect ? { onReconnect } : {}) });
  const first = items.next();
  first.catch(() => {});
  // A stream that fails before it opens rejects `first`: surface that rather than wait forever.
  await Promise.race([open, first.then(() => undefined)]);

  const runIds: string[] = [];
  let pausing = false;
  const pause = () => {
    if (pausing) return;
    pausing = true;
    client.runs.pause(id).catch(() => {});
  };
  try {
    const decide = async (): Promise<boolean> => {
      const current = await client.conversations.get(id);
      if (!onApproval || current.pending_actions.length === 0 || signal?.aborted) return false;
      const decision = await onApproval(current.pending_actions, current);
      if (decision === 'leave' || signal?.aborted) return false;
      const started = decision === 'approve' ? await client.runs.approve(id) : await client.runs.reject(id, typeof decision === 'object' ? { reason: decision.reject } : {});
      runIds.push(started.run_id);
      return true;
    };
    if (prompt !== undefined) {
      const accepted = await client.messages.send(id, { content: prompt });
      if (accepted.run_id) runIds.push(accepted.run_id);
    } else if (conversation.status === 'waiting_for_confirmation') {
      if (!(await decide())) return;
    } else if (conversation.status === 'running' && conversation.current_run_id) {
      runIds.push(conversation.current_run_id);
    } else {
      runIds.push((await client.runs.start(id)).run_id);
    }
    if (runIds.length === 0) return;
    if (signal?.aborted) pause();
    signal?.addEventListener('abort', pause, { once: true });

    let next: IteratorResult<StreamItem> = await first;
    while (!next.done) {
      const event = next.value.event;
      yield event;
      if (event.kind === 'question' && onQuestion && !signal?.aborted) {
        const content = await onQuestion(event, await client.conversations.get(id));
        await client.runs.answer(id, { tool_call_id: event.tool_call_id, content });
      }
      if (event.kind === 'state_update' && event.run_id && event.run_id === runIds.at(-1) && TERMINAL.has(event.status)) {
        if (event.status === 'waiting_for_input' && onQuestion) {
          next = await items.next();
          continue;
        }
        if (event.status !== 'waiting_for_confirmation' || !(await decide())) return;
      }
      next = await items.next();
    }
  } finally {
    signal?.removeEventListener('abort', pause);
    streamAbort.abort();
    await items.return(undefined);
  }
}

/** Follows a query to its end and sums it up (see RunResult). */
export async function runToEnd(client: QueryClient, options: QueryOptions): Promise<RunResult> {
  let conversationId = options.conversation_id ?? '';
  const events: StreamEvent[] = [];
  const runIds = new Set<string>();
  let status: ConversationStatus | null = null;
  let finalText: string | null = null;
  let error: RunResult['error'] = null;
  for await (const event of query(client, { ...options, onConversation: (conversation) => {
    conversationId = conversation.id;
    options.onConversation?.(conversation);
  } })) {
    events.push(event);
    options.onEvent?.(event);
    if (!isPersisted(event)) continue;
    if ('run_id' in event && event.run_id) runIds.add(event.run_id);
    // The final text is the main agent's: a subagent's replies are results for it, not for the user.
    if (event.kind === 'message' && event.source === 'agent' && !event.parent_tool_call_id) finalText = event.content;
    if (event.kind === 'action' && event.tool_name === 'finish' && !event.parent_tool_call_id && typeof event.arguments.message === 'string') finalText = event.arguments.message;
    if (event.kind === 'agent_error') error = { code: event.error, message: event.message };
    if (event.kind === 'state_update') status = event.status;
  }
  const usage: Usage = { prompt_tokens: 0, completion_tokens: 0, cost: 0 };
  let output: unknown = null;
  for (const runId of runIds) {
    const run = await client.runs.get(conversationId, runId);
    usage.prompt_tokens += run.usage.prompt_tokens;
    usage.completion_tokens += run.usage.completion_tokens;
    usage.cost += run.usage.cost;
    if ('output' in run && run.output !== undefined && run.output !== null) output = run.output;
  }
  status ??= (await client.conversations.get(conversationId)).status;
  return { conversation_id: conversationId, run_ids: [...runIds], status, final_text: finalText, output, usage, error, events };
}

export function isPersisted(event: StreamEvent): event is AgentEvent {
  return event.kind !== 'message_delta' && event.kind !== 'reasoning_delta';
}
