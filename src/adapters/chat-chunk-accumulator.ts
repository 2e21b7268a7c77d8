/**
 * Reassembles a streamed Chat Completions response (the OpenAI wire format, typed structurally so
 * only openai-llm.ts imports the SDK): text deltas, tool calls whose pieces arrive by `index`, the
 * finish reason and the usage chunk.
 */
import type { LlmResponse, LlmSettings, LlmToolCall } from '../core/agent/llm.js';

export interface ChatChunkLike {
  choices?: Array<{
    delta?: {
      content?: string | null;
      tool_calls?: Array<{ index?: number; id?: string; function?: { name?: string; arguments?: unknown } }>;
    };
    finish_reason?: string | null;
  }>;
  usage?: UsageLike | null;
}

export interface UsageLike {
  prompt_tokens?: number;
  completion_tokens?: number;
}

interface PartialCall {
  id: string;
  name: string;
  arguments: string;
}

export class ChatChunkAccumulator {
  private content = '';
  private readonly calls: PartialCall[] = [];
  private readonly slotByIndex = new Map<number, number>();
  private finishReason: string | null = null;
  private usage: UsageLike | null = null;
  /** Chunks seen so far. */
  chunkCount = 0;

  /** Adds a chunk; returns its text delta ('' when none). */
  add(chunk: ChatChunkLike): string {
    this.chunkCount++;
    if (chunk.usage) this.usage = chunk.usage;
    const choice = chunk.choices?.[0];
    if (!choice) return '';
    if (choice.finish_reason) this.finishReason = choice.finish_reason;
    for (const [position, delta] of (choice.delta?.tool_calls ?? []).entries()) {
      const index = delta.index ?? position;
      const slot = this.slotByIndex.get(index);
      let call = slot === undefined ? undefined : this.calls[slot];
      // Some servers reuse index 0 for every call: a new id at a used index is a new call.
      if (!call || (delta.id && call.id && delta.id !== call.id)) {
        call = { id: '', name: '', arguments: '' };
        this.slotByIndex.set(index, this.calls.push(call) - 1);
      }
      if (delta.id) call.id = delta.id;
      if (delta.function?.name && !call.name) call.name = delta.function.name;
      const args = delta.function?.arguments;
      if (args != null) call.arguments += typeof args === 'string' ? args : JSON.stringify(args);
    }
    const text = choice.delta?.content ?? '';
    this.content += text;
    return text;
  }

  result(settings: LlmSettings): LlmResponse {
    return {
      content: this.content === '' ? null : this.content,
      toolCalls: this.calls.filter((call) => call.name || call.arguments).map(normalizeToolCall),
      usage: usageOf(this.usage, settings),
      finishReason: this.finishReason,
    };
  }
}

/** Arguments always as JSON text (some servers send objects); a missing id gets a fresh one. */
export function normalizeToolCall(call: { id?: string | undefined; name: string; arguments: unknown }): LlmToolCall {
  const args = call.arguments;
  return {
    id: call.id || `call_${crypto.randomUUID().replace(/-/g, '').slice(0, 24)}`,
    name: call.name,
    arguments: typeof args === 'string' ? args : args == null ? '' : JSON.stringify(args),
  };
}

/** Tokens as reported (0 when the server sent none) and cost from the per-token prices. */
export function usageOf(usage: UsageLike | null | undefined, settings: LlmSettings): LlmResponse['usage'] {
  const prompt = usage?.prompt_tokens ?? 0;
  const completion = usage?.completion_tokens ?? 0;
  const cost = prompt * (settings.input_cost_per_token ?? 0) + completion * (settings.output_cost_per_token ?? 0);
  return { prompt_tokens: prompt, completion_tokens: completion, cost };
}
