import { z } from 'zod';
import { Timestamp } from './common.js';
import { StoredPart } from './message-content.js';
import { Usage, UsageCounts } from './usage.js';

export const EventSource = z.enum(['user', 'agent', 'environment', 'system']).meta({ id: 'EventSource' });
export type EventSource = z.infer<typeof EventSource>;

export const ConversationStatus = z
  .enum(['idle', 'running', 'paused', 'waiting_for_confirmation', 'waiting_for_input', 'finished', 'error', 'stuck'])
  .describe('`waiting_for_input`: the run is waiting for the answer to an `ask_user` question (POST /answer, or the next message).')
  .meta({ id: 'ConversationStatus' });
export type ConversationStatus = z.infer<typeof ConversationStatus>;

export const EVENT_KINDS = [
  'system_prompt',
  'message',
  'action',
  'observation',
  'rejection',
  'state_update',
  'agent_error',
  'usage',
  'condensation',
  'hook',
  'rewind',
  'fork',
  'question',
  'interrupt',
  'rollback',
  'mcp_refused',
  'llm_fallback',
  'llm_retry',
  'budget_exceeded',
  'reasoning',
  'schedule_fire',
] as const;
export const EventKind = z.enum(EVENT_KINDS).meta({ id: 'EventKind' });
export type EventKind = z.infer<typeof EventKind>;

const JsonObject = z.record(z.string(), z.unknown());

/** What a message sent while a run is in progress does (the conversation's, or the message's own). */
export const MultitaskStrategy = z
  .enum(['enqueue', 'interrupt', 'reject', 'rollback'])
  .describe(
    'What a message sent while a run is in progress does. `enqueue` (default): the run takes it after its current turn. `interrupt`: the run stops its current tool call or LLM turn, then takes it. `reject`: refused with 409 `run_in_progress`. `rollback`: the run is canceled, its events leave the LLM history (they stay in the log) and a new run starts with the message.',
  )
  .meta({ id: 'MultitaskStrategy' });
export type MultitaskStrategy = z.infer<typeof MultitaskStrategy>;

const base = {
  id: z.uuid(),
  seq: z.int().min(1).describe('1, 2, 3… per conversation, with no gaps.'),
  conversation_id: z.uuid(),
  timestamp: Timestamp,
};

/** Set on every event emitted inside a subagent; top-level events carry neither. */
const subagentFields = {
  parent_tool_call_id: z.string().optional().describe('Inside a subagent: the id of the `task` call that runs it.'),
  agent: z.string().optional().describe("Inside a subagent: the subagent's name (its `subagent_type`)."),
};
export type SubagentTags = { parent_tool_call_id?: string | undefined; agent?: string | undefined };

/** Each kind's own fields, without the envelope. The union below adds the envelope. */
export const eventBodies = {
  system_prompt: z.object({
    kind: z.literal('system_prompt'),
    source: z.literal('system'),
    content: z.string(),
    tools: z.array(JsonObject).describe('The tool schemas sent to the LLM.'),
  }),
  message: z.object({
    kind: z.literal('message'),
    source: z.enum(['user', 'agent', 'system']).describe('`system`: a note agentd gave the model (its answer was empty or cut off), sent as a user message.'),
    role: z.enum(['user', 'assistant']),
    content: z.string(),
    run_id: z.uuid().nullable().optional(),
    parts: z.array(StoredPart).optional().describe('Set when the message has images: its text and image parts in order (workdir images by path, never their bytes); `content` is its text.'),
    output_schema: JsonObject.optional().describe('The JSON Schema the answer to this message must match (the run\'s `output`).'),
    answers_tool_call_id: z
      .string()
      .optional()
      .describe('Set on a user message that answered an open `ask_user` question: the model reads it as that call\'s result, not as a message.'),
    multitask_strategy: MultitaskStrategy.optional().describe('Set on a user message that arrived while a run was in progress: what it did to that run.'),
  }),
  action: z.object({
    kind: z.literal('action'),
    source: z.literal('agent'),
    tool_call_id: z.string(),
    tool_name: z.string(),
    arguments: JsonObject,
    thought: z.string().nullable().describe('Assistant text of the turn that made this call.'),
    run_id: z.uuid().nullable(),
    llm_response_id: z.string().nullable().optional().describe('Groups the calls one LLM response made.'),
    provider_fields: JsonObject.optional().describe("Fields the provider attached to the tool call (Gemini's `extra_content`), sent back with it in later requests."),
    original_arguments: JsonObject.optional().describe('The arguments the LLM sent, when a PreToolUse hook rewrote them (`arguments` is what runs).'),
  }),
  observation: z.object({
    kind: z.literal('observation'),
    source: z.literal('environment'),
    tool_call_id: z.string(),
    tool_name: z.string(),
    content: z.string().describe('The text the LLM sees.'),
    is_error: z.boolean(),
    data: JsonObject.describe('Tool-specific data, e.g. `exit_code`, `cwd`.'),
    run_id: z.uuid().nullable().optional(),
  }),
  rejection: z.object({
    kind: z.literal('rejection'),
    source: z.enum(['user', 'system']).describe('`user`: rejected with POST /reject; `system`: refused by a permission rule or a hook.'),
    tool_call_id: z.string(),
    tool_name: z.string(),
    reason: z.string(),
    rule: z.string().optional().describe('The permission rule that denied the call, e.g. `deny: bash(rm -rf*)`.'),
    hook_point: z.string().optional().describe('The hook point whose hook blocked the call.'),
    run_id: z.uuid().nullable().optional(),
  }),
  state_update: z.object({
    kind: z.literal('state_update'),
    source: z.literal('system'),
    status: ConversationStatus,
    run_id: z.uuid().nullable().optional(),
    reason: z.string().nullable().optional(),
  }),
  agent_error: z.object({
    kind: z.literal('agent_error'),
    source: z.literal('system'),
    error: z.string().describe('Machine code, e.g. `llm_rate_limited`.'),
    message: z.string(),
    details: JsonObject.nullable().optional().describe('More about the error, e.g. `attempts[]` (`model`, `reason`, `code`, `status`, `message`) of `llm_unavailable`.'),
    run_id: z.uuid().nullable().optional(),
  }),
  usage: z.object({
    kind: z.literal('usage'),
    source: z.literal('system'),
    ...UsageCounts.shape,
    prompt_tokens: UsageCounts.shape.prompt_tokens.nullable().describe('Null when the provider reported no usage for this call (unknown, not zero).'),
    completion_tokens: UsageCounts.shape.completion_tokens.nullable().describe('Includes reasoning tokens, whatever the provider\'s convention; null when unknown.'),
    cost: UsageCounts.shape.cost.nullable().describe("The provider's figure when it reports one (OpenRouter), else computed from the per-token prices; null when the usage is unknown."),
    cached_tokens: z.int().min(0).nullable().optional().describe('Prompt tokens read from the provider\'s cache; null when unknown.'),
    reasoning_tokens: z.int().min(0).nullable().optional().describe('Completion tokens spent reasoning; null when unknown.'),
    model: z.string().optional().describe('The model that answered (a fallback when the primary failed).'),
    totals: Usage,
    run_id: z.uuid().nullable().optional(),
  }),
  condensation: z.object({
    kind: z.literal('condensation'),
    source: z.literal('system'),
    summary: z.string().describe('What the LLM wrote about the forgotten events; the LLM history holds it in their place.'),
    forgotten_from_seq: z.int().min(1).describe('The first event summarized (the log keeps it; the LLM no longer sees it).'),
    forgotten_to_seq: z.int().min(1).describe('The last event summarized.'),
    tokens_before: z.int().min(0).describe('Prompt tokens of the history before: as the provider reported them for the last request, else estimated (~4 characters a token).'),
    tokens_after: z.int().min(0).describe('Prompt tokens of the condensed history, estimated (~4 characters a token) from tokens_before.'),
    trigger: z.enum(['auto', 'manual', 'context_exceeded']).describe('`auto`: the last prompt passed `condenser.max_tokens`; `manual`: POST /condense; `context_exceeded`: the provider refused the prompt as too long.'),
    run_id: z.uuid().nullable().optional(),
  }),
  hook: z.object({
    kind: z.literal('hook'),
    source: z.literal('system'),
    hook_point: z.enum(['PreToolUse', 'PostToolUse', 'UserPromptSubmit', 'Stop', 'SubagentStop', 'PreCompact', 'SessionStart']),
    matcher: z.string().nullable(),
    hook: z.string().describe('The command, or the url of an http hook (secret values masked).'),
    duration_ms: z.number().min(0),
    decision: z.enum(['allow', 'block', 'rewrite', 'error']),
    reason: z.string().nullable().optional(),
    tool_call_id: z.string().nullable().optional(),
    tool_name: z.string().nullable().optional(),
    run_id: z.uuid().nullable().optional(),
  }),
  rewind: z.object({
    kind: z.literal('rewind'),
    source: z.literal('user'),
    checkpoint_id: z.uuid(),
    files: z.boolean().describe('The workdir was restored to the checkpoint.'),
    conversation: z.boolean().describe('The LLM history went back to the events before `to_seq` (the log keeps every event).'),
    to_seq: z.int().min(1).describe("The checkpoint's seq: the history keeps the events before it."),
    undo_checkpoint_id: z.uuid().describe('A checkpoint taken just before this rewind: rewind to it to undo this one.'),
  }),
  fork: z.object({
    kind: z.literal('fork'),
    source: z.literal('system'),
    parent_conversation_id: z.uuid(),
    at_seq: z.int().min(0).describe("The events up to this seq are the parent's, copied with new ids and the same seqs; this event follows them (seq at_seq + 1) and is the first the fork records itself."),
    copy_workdir: z.boolean(),
    checkpoint_id: z.uuid().nullable().describe("The parent's checkpoint the workdir was copied from (null when the fork shares the parent's workdir)."),
  }),
  question: z.object({
    kind: z.literal('question'),
    source: z.literal('agent'),
    tool_call_id: z.string().describe('The `ask_user` call: answer it with POST /conversations/{id}/answer (or the next message).'),
    question: z.string(),
    options: z.array(z.string()).optional().describe('Suggested answers; any text is accepted.'),
    run_id: z.uuid().nullable().optional(),
  }),
  interrupt: z.object({
    kind: z.literal('interrupt'),
    source: z.literal('user'),
    run_id: z.uuid(),
    message_seq: z.int().min(1).describe('The user message (multitask_strategy `interrupt`) that interrupted the run.'),
    stopped: z.enum(['tool', 'llm', 'none']).describe('What was stopped: a running tool call, the LLM answer being streamed (discarded), or nothing (the run was between steps).'),
    tool_call_ids: z.array(z.string()).describe('Tool calls of the interrupted turn that were stopped or not run.'),
  }),
  rollback: z.object({
    kind: z.literal('rollback'),
    source: z.literal('user'),
    run_id: z.uuid().describe('The canceled run.'),
    forgotten_from_seq: z.int().min(1).describe('The first event taken out of the LLM history (the messages the run started from, else its first event).'),
    forgotten_to_seq: z.int().min(1).describe('The last event taken out of the LLM history (the end of the canceled run).'),
  }),
  mcp_refused: z.object({
    kind: z.literal('mcp_refused'),
    source: z.literal('system'),
    server: z.string().describe('The MCP server\'s name (its tools would be `mcp__<server>__<tool>`).'),
    config_source: z.enum(['conversation', 'project', 'server']).describe('Where the server is configured: the conversation, the workdir\'s `.mcp.json`, or AGENTD_MCP_CONFIG.'),
    reason: z.string().describe('Why the connection was not made (secret values masked): the conversation has no network, or the address is this machine, its network or a reserved range.'),
    run_id: z.uuid().nullable().optional(),
  }),
  llm_fallback: z.object({
    kind: z.literal('llm_fallback'),
    source: z.literal('system'),
    from_model: z.string(),
    to_model: z.string(),
    reason: z.string().describe('Why: a class of `llm.fallback_on` (`overloaded`, `unavailable`, `timeout`, ...), or `cooldown` (the model failed recently, for any conversation).'),
    attempt: z.int().min(0).describe('Attempts failed (or skipped) so far in this request.'),
    run_id: z.uuid().nullable().optional(),
  }),
  llm_retry: z.object({
    kind: z.literal('llm_retry'),
    source: z.literal('system'),
    model: z.string(),
    reason: z.string().describe('The failure class (`overloaded`, `rate_limited`, ...), or `stream_interrupted`: the answer broke off after it began and is asked again.'),
    wait_s: z.number().min(0),
    run_id: z.uuid().nullable().optional(),
  }),
  budget_exceeded: z.object({
    kind: z.literal('budget_exceeded'),
    source: z.literal('system'),
    limit: z.object({ max_cost_usd: z.number().optional(), max_tokens: z.int().optional() }).describe('The limit reached.'),
    used: z.object({ cost_usd: z.number(), tokens: z.int() }).describe('What the run or conversation has used.'),
    per: z.enum(['run', 'conversation']),
    action: z.enum(['pause', 'stop', 'notify']).describe('What happened: the run paused, stopped (status error), or went on (notify, once per run).'),
    run_id: z.uuid().nullable().optional(),
  }),
  reasoning: z.object({
    kind: z.literal('reasoning'),
    source: z.literal('agent'),
    content: z.string().describe('What the model reasoned before its answer or calls (secret values masked); empty when `llm.reasoning.show` is false or the provider gave only an opaque form.'),
    provider_data: z
      .unknown()
      .optional()
      .describe('Opaque provider payloads kept verbatim to be sent back (signatures, encrypted items, OpenRouter `reasoning_details`); never shown in the dashboard.'),
    origin: z
      .object({ api: z.enum(['chat', 'responses', 'anthropic']), model: z.string(), base_url: z.string().optional() })
      .optional()
      .describe('The protocol and model that produced it: `provider_data` goes back only to the same model.'),
    llm_response_id: z.string().nullable().optional().describe('The LLM response it belongs to (the `llm_response_id` of its actions).'),
    run_id: z.uuid().nullable().optional(),
  }),
  schedule_fire: z.object({
    kind: z.literal('schedule_fire'),
    source: z.literal('system'),
    schedule_id: z.uuid(),
    fire_id: z.uuid().describe('Derived from the schedule and the slot (GET /schedules/{id}/fires).'),
    scheduled_for: Timestamp.describe('The slot; a manual trigger: when it was asked for.'),
  }),
} as const;

function withEnvelope<K extends EventKind>(kind: K, id: string) {
  return eventBodies[kind].extend(subagentFields).extend(base).meta({ id });
}

export const SystemPromptEvent = withEnvelope('system_prompt', 'SystemPromptEvent');
export const MessageEvent = withEnvelope('message', 'MessageEvent');
export const ActionEvent = withEnvelope('action', 'ActionEvent');
export const ObservationEvent = withEnvelope('observation', 'ObservationEvent');
export const RejectionEvent = withEnvelope('rejection', 'RejectionEvent');
export const StateUpdateEvent = withEnvelope('state_update', 'StateUpdateEvent');
export const AgentErrorEvent = withEnvelope('agent_error', 'AgentErrorEvent');
export const UsageEvent = withEnvelope('usage', 'UsageEvent');
export const CondensationEvent = withEnvelope('condensation', 'CondensationEvent');
export const HookEvent = withEnvelope('hook', 'HookEvent');
export const RewindEvent = withEnvelope('rewind', 'RewindEvent');
export const ForkEvent = withEnvelope('fork', 'ForkEvent');
export const QuestionEvent = withEnvelope('question', 'QuestionEvent');
export const InterruptEvent = withEnvelope('interrupt', 'InterruptEvent');
export const RollbackEvent = withEnvelope('rollback', 'RollbackEvent');
export const McpRefusedEvent = withEnvelope('mcp_refused', 'McpRefusedEvent');
export const LlmFallbackEvent = withEnvelope('llm_fallback', 'LlmFallbackEvent');
export const LlmRetryEvent = withEnvelope('llm_retry', 'LlmRetryEvent');
export const BudgetExceededEvent = withEnvelope('budget_exceeded', 'BudgetExceededEvent');
export const ReasoningEvent = withEnvelope('reasoning', 'ReasoningEvent');
export const ScheduleFireEvent = withEnvelope('schedule_fire', 'ScheduleFireEvent');

export const AgentEvent = z
  .discriminatedUnion('kind', [
    SystemPromptEvent,
    MessageEvent,
    ActionEvent,
    ObservationEvent,
    RejectionEvent,
    StateUpdateEvent,
    AgentErrorEvent,
    UsageEvent,
    CondensationEvent,
    HookEvent,
    RewindEvent,
    ForkEvent,
    QuestionEvent,
    InterruptEvent,
    RollbackEvent,
    McpRefusedEvent,
    LlmFallbackEvent,
    LlmRetryEvent,
    BudgetExceededEvent,
    ReasoningEvent,
    ScheduleFireEvent,
  ])
  .meta({ id: 'Event' });
export type AgentEvent = z.infer<typeof AgentEvent>;

type Body<K extends EventKind> = z.infer<(typeof eventBodies)[K]>;
/** An event as core produces it, before the log gives it an id, a seq and a timestamp. */
export type NewEvent = { [K in EventKind]: Body<K> & SubagentTags }[EventKind];
export type EventOf<K extends EventKind> = Extract<AgentEvent, { kind: K }>;

/**
 * Streaming-only: never persisted, no seq. This and the notices below are named in the AsyncAPI
 * document only (a global meta id would add them to the OpenAPI components too).
 */
export const MessageDelta = z
  .object({
    kind: z.literal('message_delta'),
    conversation_id: z.uuid(),
    run_id: z.uuid().nullable(),
    content_delta: z.string().describe('The next piece of the assistant text, as the LLM streams it (secret values masked).'),
    ...subagentFields,
  });
export type MessageDelta = z.infer<typeof MessageDelta>;

/** Streaming-only, like `message_delta`: the next piece of the model's reasoning (never persisted, no seq). */
export const ReasoningDelta = z.object({
  kind: z.literal('reasoning_delta'),
  conversation_id: z.uuid(),
  run_id: z.uuid().nullable(),
  content_delta: z.string().describe('The next piece of the reasoning text, as the LLM streams it (secret values masked).'),
  ...subagentFields,
});
export type ReasoningDelta = z.infer<typeof ReasoningDelta>;

/** What the delta channel carries beside the log. */
export type StreamDelta = MessageDelta | ReasoningDelta;
export const STREAM_DELTA_KINDS = ['message_delta', 'reasoning_delta'] as const;

/** The last item of an SSE stream that ends because its subscriber fell behind (no id). */
export const StreamOverflowNotice = z
  .object({
    reason: z.literal('subscriber_too_slow'),
    resume_after: z.string().describe('The last cursor sent: reconnect with `Last-Event-ID: <resume_after>` to miss nothing.'),
  });

/** The last item of an SSE stream the server ends (no id): its conversation was deleted, or the server is stopping. */
export const StreamClosedNotice = z.object({
  reason: z
    .enum(['conversation_deleted', 'server_shutting_down'])
    .describe('`conversation_deleted`: the stream is over for good; `server_shutting_down`: reconnect with `Last-Event-ID` once the server is back (a restart), to miss nothing.'),
  conversation_id: z.uuid().optional().describe('The deleted conversation (with `conversation_deleted`).'),
});
