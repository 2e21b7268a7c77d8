import type { AgentEvent } from '../schemas/event.js';
import type { LlmMessage, LlmToolCall } from './llm.js';

type AssistantMessage = Extract<LlmMessage, { role: 'assistant' }>;

export const INTERRUPTED_RESULT = 'The tool call did not complete: it was interrupted before it returned a result.';

/**
 * The conversation as the LLM sees it, folded from events one at a time. It keeps the
 * provider's rules whatever order events arrive in: the calls of one LLM response share one
 * assistant message; each call's result follows that message; a user message that arrives while
 * calls are still open waits until they are answered; `snapshot()` closes calls left open.
 */
export class ConversationHistory {
  private system: string | null = null;
  /** The tool schemas recorded with the system prompt, as JSON (the runtime compares them). */
  private systemTools = '';
  private readonly messages: LlmMessage[] = [];
  private deferred: LlmMessage[] = [];
  private readonly openCalls = new Map<string, string>();
  private current: { responseId: string | null; message: AssistantMessage } | null = null;
  /** While an LLM turn is in flight, user messages wait until its answer is recorded. */
  private holding = false;
  /** The seq of the last user message folded in (the loop uses it to notice new ones). */
  lastUserSeq = 0;
  lastSeq = 0;
  /** User messages the UserPromptSubmit hooks have not seen yet (see takePrompts). */
  private prompts: { seq: number; content: string }[] = [];
  private lastAgentSeq = 0;

  apply(event: AgentEvent): void {
    if (event.seq <= this.lastSeq) return;
    this.lastSeq = event.seq;
    switch (event.kind) {
      case 'system_prompt':
        this.system = event.content;
        this.systemTools = JSON.stringify(event.tools);
        return;
      case 'message':
        // A subagent's task arrives from the agent that started it, as a user message (source agent, role user).
        if (event.source === 'user' || event.source === 'system' || event.role === 'user') {
          if (event.source === 'user') {
            this.lastUserSeq = event.seq;
            if (this.prompts.length < 100) this.prompts.push({ seq: event.seq, content: event.content });
          }
          if (this.holding) this.deferred.push({ role: 'user', content: event.content });
          else this.push({ role: 'user', content: event.content });
        } else {
          this.lastAgentSeq = event.seq;
          this.push({ role: 'assistant', content: event.content });
        }
        this.current = null;
        return;
      case 'action':
        this.lastAgentSeq = event.seq;
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
      default:
        return;
    }
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

  /** An LLM turn starts: user messages that arrive now follow its answer. */
  hold(): void {
    this.holding = true;
  }

  /** The turn's answer is recorded: held messages follow it (or the results of its calls). */
  release(): void {
    this.holding = false;
    if (this.openCalls.size === 0) this.flushDeferred();
  }

  get hasSystemPrompt(): boolean {
    return this.system !== null;
  }

  /** True when `content` and `tools` are what the last system_prompt event recorded. */
  hasSystemPromptOf(content: string, tools: readonly unknown[]): boolean {
    return this.system === content && this.systemTools === JSON.stringify(tools);
  }

  /** The tool name of an open call. */
  toolNameOf(toolCallId: string): string | undefined {
    return this.openCalls.get(toolCallId);
  }

  /** Tool call ids that have no result yet, in order. */
  get pendingCallIds(): string[] {
    return [...this.openCalls.keys()];
  }

  /** The messages to send: system first, every call answered, deferred user messages after. */
  snapshot(): LlmMessage[] {
    const out: LlmMessage[] = [];
    if (this.system !== null) out.push({ role: 'system', content: this.system });
    out.push(...this.messages);
    for (const id of this.openCalls.keys()) out.push({ role: 'tool', tool_call_id: id, content: INTERRUPTED_RESULT });
    out.push(...this.deferred);
    return out.map((message) => (message.role === 'assistant' && message.tool_calls ? { ...message, tool_calls: [...message.tool_calls] } : message));
  }

  private push(message: LlmMessage): void {
    if (this.openCalls.size > 0) this.deferred.push(message);
    else this.messages.push(message);
  }

  private addCall(responseId: string | null, thought: string | null, call: LlmToolCall): void {
    const joinable = this.current && responseId !== null && this.current.responseId === responseId;
    if (!joinable) {
      if (this.openCalls.size > 0) this.closeOpenCalls();
      const message: AssistantMessage = { role: 'assistant', content: thought && thought.length > 0 ? thought : null, tool_calls: [] };
      this.messages.push(message);
      this.current = { responseId, message };
    }
    this.current!.message.tool_calls!.push(call);
    this.openCalls.set(call.id, call.name);
  }

  private answer(toolCallId: string, content: string): void {
    if (!this.openCalls.has(toolCallId)) return;
    this.openCalls.delete(toolCallId);
    this.messages.push({ role: 'tool', tool_call_id: toolCallId, content });
    if (this.openCalls.size === 0) this.flushDeferred();
  }

  private closeOpenCalls(): void {
    for (const id of this.openCalls.keys()) this.messages.push({ role: 'tool', tool_call_id: id, content: INTERRUPTED_RESULT });
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

/** A reason as a sentence: ends with a full stop unless it already ends with punctuation. */
function sentenceEnd(text: string): string {
  const trimmed = text.trim();
  return /[.!?]$/.test(trimmed) ? trimmed : `${trimmed}.`;
}
