import type { AgentEvent } from '../schemas/event.js';
import { readAsset } from '../../assets.js';
import { HistoryEntry } from './history-entry.js';
import { JSON_MESSAGE_CODEC, type EncodedMessages, type LlmMessage, type LlmMessageCodec, type LlmReasoning, type LlmToolCall, type LlmUserPart } from './llm.js';
import type { StoredPart } from '../schemas/message-content.js';

const CONDENSED_HISTORY = readAsset(import.meta.url, 'condensed-history.md').trim();
/** How every condensed summary's message opens (the template up to its first slot). */
const CONDENSED_HISTORY_OPENING = CONDENSED_HISTORY.slice(0, CONDENSED_HISTORY.indexOf('{{'));

/**
 * Whether a user message's text is a condensation's summary: the stable start of the history
 * after the system prompt, where a client that caches prompts puts a breakpoint.
 */
export function isCondensedSummary(text: string): boolean {
  return CONDENSED_HISTORY_OPENING.length > 0 && text.startsWith(CONDENSED_HISTORY_OPENING);
}

type AssistantMessage = Extract<LlmMessage, { role: 'assistant' }>;

export { HistoryEntry };

/** The tools' JSON (~13 KB) the last folded system prompt recorded: conversations with the same tools hold one copy of it. */
let lastToolsJson = '';
function sharedToolsJson(json: string): string {
  if (json !== lastToolsJson) lastToolsJson = json;
  return lastToolsJson;
}

/** A range of events taken out of the LLM history (they stay in the log), with what replaces them. */
export interface ForgottenRange {
  fromSeq: number;
  toSeq: number;
  /** Sent in their place (a condensation's summary), or nothing (a rollback). */
  replacement: LlmMessage | null;
}

export const INTERRUPTED_RESULT = 'The tool call did not complete: it was interrupted before it returned a result.';

/**
 * The conversation as the LLM sees it, folded from events one at a time. It keeps the
 * provider's rules whatever order events arrive in: the calls of one LLM response share one
 * assistant message; each call's result follows that message; a user message that arrives during
 * a turn waits until the turn's calls are all answered (it goes in before the next answer, or at
 * the end of `snapshot()`); `snapshot()` closes calls left open.
 * Events that take a range out of the history (`condensation`, `rollback`) are folded like the
 * others, so a restart rebuilds the same view from the log. Messages are kept as the texts of
 * `codec` (the LLM client's, see HistoryEntry); `encoded()` hands them to a request as they are.
 */
export class ConversationHistory {
  constructor(readonly codec: LlmMessageCodec = JSON_MESSAGE_CODEC) {}

  /** The system prompt, kept once: as a request carries it (encoded once per prompt). */
  private system: HistoryEntry | null = null;
  /** The tool schemas recorded with the system prompt, as JSON (the runtime compares them). */
  private systemTools = '';
  /** The schema objects last found equal to `systemTools` (the same objects again need no JSON: tool-offer.ts derives each tool's once). */
  private systemToolsSeen: readonly unknown[] = [];
  private messages: HistoryEntry[] = [];
  private deferred: HistoryEntry[] = [];
  private readonly openCalls = new Map<string, string>();
  /** The assistant message of the turn being recorded: calls of the same response join it. */
  private current: { responseId: string | null; entry: HistoryEntry; message: AssistantMessage } | null = null;
  /** The seq of the event being folded (entries carry it). */
  private folding = 0;
  /** Prompt tokens of the last LLM request as reported (a condensation sets its estimate). */
  lastPromptTokens = 0;
  /** The first user message no agent event followed yet (what a run started now takes as its input). */
  firstUnansweredUserSeq: number | null = null;
  /** While a turn is in flight (its LLM request, then its calls), user messages wait until it is recorded. */
  private holding = false;
  /** The `output_schema` of the last user message (null when it had none): what the run's answer must match. */
  outputSchema: Record<string, unknown> | null = null;
  /** The seq of the last user message folded in (the loop uses it to notice new ones). */
  lastUserSeq = 0;
  lastSeq = 0;
  /** User messages the UserPromptSubmit hooks have not seen yet (see takePrompts). */
  private prompts: { seq: number; content: string }[] = [];
  private lastAgentSeq = 0;
  /** The reasoning of the answer being recorded: it goes on the assistant message its message or first action makes. */
  private reasoning: LlmReasoning | null = null;

  apply(event: AgentEvent): void {
    if (event.seq <= this.lastSeq) return;
    this.lastSeq = event.seq;
    this.folding = event.seq;
    switch (event.kind) {
      case 'system_prompt':
        this.system = this.entry({ role: 'system', content: event.content });
        this.systemTools = sharedToolsJson(JSON.stringify(event.tools));
        // Recorded by this process, the event holds the very objects the next run is offered (their JSON is the one just made).
        this.systemToolsSeen = Array.isArray(event.tools) ? [...event.tools] : [];
        return;
      case 'message':
        // The answer to an `ask_user` question: the model reads it as that call's observation.
        if (event.answers_tool_call_id !== undefined) return;
        // A subagent's task arrives from the agent that started it, as a user message (source agent, role user).
        if (event.source === 'user' || event.source === 'system' || event.role === 'user') {
          if (event.source === 'user') {
            this.lastUserSeq = event.seq;
            this.firstUnansweredUserSeq ??= event.seq;
            this.outputSchema = event.output_schema ?? null;
            if (this.prompts.length < 100) this.prompts.push({ seq: event.seq, content: event.content });
          }
          // An answer that was nothing but reasoning (a note follows it): its reasoning goes nowhere.
          this.reasoning = null;
          // Anything open (a turn's calls, a turn that may add calls, messages already waiting): it waits too.
          const waits = this.holding || this.openCalls.size > 0 || this.current !== null || this.deferred.length > 0;
          if (waits) this.deferred.push(this.entry({ role: 'user', content: event.parts ? event.parts.map(toLlmPart) : event.content }));
          else this.messages.push(this.entry({ role: 'user', content: event.parts ? event.parts.map(toLlmPart) : event.content }));
        } else {
          this.agentSpoke(event.seq);
          if (this.openCalls.size > 0) this.closeOpenCalls();
          else if (!this.holding) this.flushDeferred();
          this.messages.push(this.entry({ role: 'assistant', content: event.content, ...this.takeReasoning() }));
          this.current = null;
        }
        return;
      case 'reasoning':
        this.reasoning = {
          text: event.content,
          ...(event.origin ? { origin: { api: event.origin.api, model: event.origin.model, ...(event.origin.base_url ? { baseUrl: event.origin.base_url } : {}) } } : {}),
          ...(event.provider_data !== undefined ? { providerData: event.provider_data } : {}),
        };
        return;
      case 'action':
        this.agentSpoke(event.seq);
        this.addCall(event.llm_response_id ?? null, event.thought, {
          id: event.tool_call_id,
          name: event.tool_name,
          arguments: JSON.stringify(event.arguments),
          ...(event.provider_fields ? { extra: event.provider_fields } : {}),
        });
        return;
      case 'observation':
        this.answer(event.tool_call_id, event.content);
        return;
      case 'rejection':
        // A rule or a hook says why in its reason; the user's reason is their own words.
        if (event.source === 'system') this.answer(event.tool_call_id, `${sentenceEnd(event.reason)} It was not executed.`);
        else this.answer(event.tool_call_id, `The user rejected this action${event.reason ? `: ${sentenceEnd(event.reason)}` : '.'} It was not executed.`);
        return;
      case 'usage':
        if (event.prompt_tokens !== null) this.lastPromptTokens = event.prompt_tokens;
        return;
      case 'condensation':
        this.forget({ fromSeq: event.forgotten_from_seq, toSeq: event.forgotten_to_seq, replacement: { role: 'user', content: condensedHistoryMessage(event) } });
        this.lastPromptTokens = event.tokens_after;
        return;
      case 'rollback':
        this.forget({ fromSeq: event.forgotten_from_seq, toSeq: event.forgotten_to_seq, replacement: null });
        return;
      default:
        return;
    }
  }

  /**
   * Takes the messages folded from events `fromSeq..toSeq` out of the history (and the user
   * messages waiting in it); the replacement, if any, takes the place of the first one. Cut only
   * where no call is open: an answered call and its results go together (see condensation-plan.ts).
   */
  forget(range: ForgottenRange): void {
    const inRange = (entry: HistoryEntry) => entry.seq >= range.fromSeq && entry.seq <= range.toSeq;
    const at = this.messages.findIndex(inRange);
    const removed = this.messages.filter(inRange);
    this.messages = this.messages.filter((entry) => !inRange(entry));
    this.deferred = this.deferred.filter((entry) => !inRange(entry));
    this.prompts = this.prompts.filter((prompt) => prompt.seq < range.fromSeq || prompt.seq > range.toSeq);
    for (const entry of removed) if (entry.role === 'assistant') for (const call of callsOf(entry)) this.openCalls.delete(call.id);
    if (this.current && inRange(this.current.entry)) this.current = null;
    if (this.firstUnansweredUserSeq !== null && this.firstUnansweredUserSeq >= range.fromSeq && this.firstUnansweredUserSeq <= range.toSeq) this.firstUnansweredUserSeq = null;
    if (range.replacement && at >= 0) this.messages.splice(at, 0, new HistoryEntry(this.codec, range.replacement, range.fromSeq, range.toSeq));
  }

  /**
   * About how many bytes of memory the history holds: the system prompt and every message (see
   * HistoryEntry.size; the tool schemas are shared between conversations and not counted). For
   * the budget of histories kept between runs (see AgentSessions).
   */
  get size(): number {
    let size = this.system?.size ?? 0;
    for (const entry of this.messages) size += entry.size;
    for (const entry of this.deferred) size += entry.size;
    return size;
  }

  /** About how many tokens the messages of `snapshot()` take (the tools offered come on top: see token-estimate.ts). */
  estimatedTokens(): number {
    let tokens = this.system?.tokens ?? 0;
    for (const entry of this.messages) tokens += entry.tokens;
    for (const entry of this.deferred) tokens += entry.tokens;
    return tokens + this.openCalls.size * 40;
  }

  /** The system prompt's share of `estimatedTokens()`. */
  get systemTokens(): number {
    return this.system?.tokens ?? 0;
  }

  /** The messages after the system prompt with the seqs they came from (what a condensation plans over). */
  entries(): readonly HistoryEntry[] {
    return this.messages;
  }

  /** User messages waiting for the turn in progress to end (they follow the entries). */
  waiting(): readonly HistoryEntry[] {
    return this.deferred;
  }

  /** How many entries come before the first one with a call still open (all of them when none is). */
  get settledLength(): number {
    if (this.openCalls.size === 0) return this.messages.length;
    const index = this.messages.findIndex((entry) => entry.role === 'assistant' && callsOf(entry).some((call) => this.openCalls.has(call.id)));
    return index < 0 ? this.messages.length : index;
  }

  /** The user messages not yet given to the UserPromptSubmit hooks, oldest first; they count as given. */
  takePrompts(): string[] {
    const out = this.prompts.map((prompt) => prompt.content);
    this.prompts = [];
    return out;
  }

  /** After folding a stored log: messages the agent already answered need no check. */
  settlePrompts(): void {
    this.prompts = this.prompts.filter((prompt) => prompt.seq > this.lastAgentSeq);
  }

  /**
   * A turn starts (its LLM request, then its calls): messages waiting so far are in the request,
   * so they go in now; messages that arrive during the turn follow its answer and its results.
   */
  hold(): void {
    if (this.openCalls.size === 0) this.flushDeferred();
    this.holding = true;
  }

  /** The turn's answer and the results of its calls are recorded: held messages follow them. */
  release(): void {
    this.holding = false;
    if (this.openCalls.size === 0) this.flushDeferred();
  }

  get hasSystemPrompt(): boolean {
    return this.system !== null;
  }

  /** True when `content` and `tools` are what the last system_prompt event recorded. */
  hasSystemPromptOf(content: string, tools: readonly unknown[]): boolean {
    const system = this.system?.message;
    if (system?.role !== 'system' || system.content !== content) return false;
    if (tools.length > 0 && tools.length === this.systemToolsSeen.length && tools.every((tool, i) => tool === this.systemToolsSeen[i])) return true;
    if (this.systemTools !== JSON.stringify(tools)) return false;
    this.systemToolsSeen = [...tools];
    return true;
  }

  /** The tool name of an open call. */
  toolNameOf(toolCallId: string): string | undefined {
    return this.openCalls.get(toolCallId);
  }

  /** Whether a call has no result yet. */
  get hasOpenCalls(): boolean {
    return this.openCalls.size > 0;
  }

  /** Tool call ids that have no result yet, in order. */
  get pendingCallIds(): string[] {
    return [...this.openCalls.keys()];
  }

  /** The messages to send: system first, every call answered, deferred user messages after (decoded: see `encoded`). */
  snapshot(): LlmMessage[] {
    const out: LlmMessage[] = [];
    if (this.system !== null) out.push(this.system.message);
    for (const entry of this.messages) out.push(entry.message);
    for (const id of this.openCalls.keys()) out.push(interrupted(id));
    for (const entry of this.deferred) out.push(entry.message);
    return out;
  }

  /** The messages of `snapshot()` as the history keeps them: texts of its codec (or messages kept as objects), nothing decoded. */
  encoded(): EncodedMessages {
    const items: (string | LlmMessage)[] = [];
    if (this.system !== null) items.push(this.system.item);
    for (const entry of this.messages) items.push(entry.item);
    for (const id of this.openCalls.keys()) {
      const message = interrupted(id);
      items.push(this.codec.encode(message) ?? message);
    }
    for (const entry of this.deferred) items.push(entry.item);
    return { codec: this.codec, items };
  }

  private entry(message: LlmMessage): HistoryEntry {
    return new HistoryEntry(this.codec, message, this.folding, this.folding);
  }

  /** The pending reasoning as an assistant message's field (none when there is none). */
  private takeReasoning(): { reasoning?: LlmReasoning } {
    const reasoning = this.reasoning;
    this.reasoning = null;
    return reasoning ? { reasoning } : {};
  }

  private agentSpoke(seq: number): void {
    this.lastAgentSeq = seq;
    this.firstUnansweredUserSeq = null;
  }

  private addCall(responseId: string | null, thought: string | null, call: LlmToolCall): void {
    const current = this.current;
    if (current && responseId !== null && current.responseId === responseId) {
      // A new message with the call added (a request already made keeps the text it sent).
      current.message = { ...current.message, tool_calls: [...(current.message.tool_calls ?? []), call] };
      current.entry.replace(current.message);
      current.entry.lastSeq = this.folding;
    } else {
      if (this.openCalls.size > 0) this.closeOpenCalls();
      else if (!this.holding) this.flushDeferred();
      const message: AssistantMessage = { role: 'assistant', content: thought && thought.length > 0 ? thought : null, tool_calls: [call], ...this.takeReasoning() };
      const entry = this.entry(message);
      this.messages.push(entry);
      this.current = { responseId, entry, message };
    }
    this.openCalls.set(call.id, call.name);
  }

  private answer(toolCallId: string, content: string): void {
    if (!this.openCalls.has(toolCallId)) return;
    this.openCalls.delete(toolCallId);
    // Waiting messages stay after the turn: its response may record more calls (they join it).
    this.messages.push(this.entry({ role: 'tool', tool_call_id: toolCallId, content }));
  }

  /** Calls a newer response left unanswered: closed where they stand, with the seq of their call. */
  private closeOpenCalls(): void {
    const seq = this.current?.entry.lastSeq ?? this.folding;
    for (const id of this.openCalls.keys()) this.messages.push(new HistoryEntry(this.codec, interrupted(id), seq, seq));
    this.openCalls.clear();
    this.flushDeferred();
  }

  private flushDeferred(): void {
    if (this.deferred.length === 0) return;
    this.messages.push(...this.deferred);
    this.deferred = [];
    this.current = null;
  }
}

/** The result an open call is given when the history is sent. */
function interrupted(toolCallId: string): LlmMessage {
  return { role: 'tool', tool_call_id: toolCallId, content: INTERRUPTED_RESULT };
}

/** The calls of an assistant entry (decoded: only where the history changes shape, never per request). */
function callsOf(entry: HistoryEntry): readonly LlmToolCall[] {
  const message = entry.message;
  return message.role === 'assistant' ? (message.tool_calls ?? []) : [];
}

/** How a condensation's summary stands in the history: a user message framing it (condensed-history.md). */
function condensedHistoryMessage(event: { summary: string; forgotten_from_seq: number; forgotten_to_seq: number }): string {
  return CONDENSED_HISTORY.replace('{{from}}', String(event.forgotten_from_seq)).replace('{{to}}', String(event.forgotten_to_seq)).replace('{{summary}}', () => event.summary.trim());
}

/** A reason as a sentence: ends with a full stop unless it already ends with punctuation. */
function sentenceEnd(text: string): string {
  const trimmed = text.trim();
  return /[.!?]$/.test(trimmed) ? trimmed : `${trimmed}.`;
}

/** A stored message part as the LLM gets it: a workdir image by path (read when the request is sent). */
function toLlmPart(part: StoredPart): LlmUserPart {
  if (part.type === 'text') return { type: 'text', text: part.text };
  return 'path' in part ? { type: 'image', mediaType: part.media_type, path: part.path } : { type: 'image', mediaType: part.media_type, data: part.data };
}
