/**
 * Reassembles a streamed Chat Completions response (the OpenAI wire format, typed structurally so
 * only openai-llm.ts imports the SDK): text deltas, tool calls whose pieces arrive by `index`, the
 * finish reason and the usage chunk.
 */
import type { LlmResponse, LlmSettings, LlmToolCall } from '../../core/agent/llm.js';

export interface ChatChunkLike {
  choices?: Array<{
    delta?: {
      content?: string | null;
      refusal?: string | null;
      tool_calls?: Array<{ index?: number; id?: string; type?: string; function?: { name?: string; arguments?: unknown } }>;
    };
    finish_reason?: string | null;
  }>;
  usage?: UsageLike | null;
  system_fingerprint?: string | null;
}

export interface UsageLike {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number | null } | null;
  completion_tokens_details?: { reasoning_tokens?: number | null } | null;
  /** OpenRouter's price of the request, in credits (USD). */
  cost?: number | null;
}

interface PartialCall {
  id: string;
  name: string;
  arguments: string;
  extra?: Record<string, unknown>;
}

/** The members of a wire tool call agentd reads itself; any other is the provider's, kept and sent back. */
const TOOL_CALL_FIELDS = new Set(['index', 'id', 'type', 'function']);

export function extraFieldsOf(call: Record<string, unknown>): Record<string, unknown> | undefined {
  const extra = Object.entries(call).filter(([key, value]) => !TOOL_CALL_FIELDS.has(key) && value !== undefined && value !== null);
  return extra.length > 0 ? Object.fromEntries(extra) : undefined;
}

export class ChatChunkAccumulator {
  private content = '';
  private refusal = '';
  private readonly calls: PartialCall[] = [];
  private readonly slotByIndex = new Map<number, number>();
  private finishReason: string | null = null;
  private usage: UsageLike | null = null;
  /** `system_fingerprint` of the stream (Ollama says `fp_ollama`). */
  fingerprint: string | null = null;
  /** The finish reason so far (null until the last choice chunk). */
  get finished(): string | null {
    return this.finishReason;
  }

  /** Chunks seen so far. */
  chunkCount = 0;

  /** Adds a chunk; returns its text delta ('' when none). */
  add(chunk: ChatChunkLike): string {
    this.chunkCount++;
    if (chunk.usage) this.usage = chunk.usage;
    if (chunk.system_fingerprint) this.fingerprint = chunk.system_fingerprint;
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
      const extra = extraFieldsOf(delta as Record<string, unknown>);
      if (extra) call.extra = { ...call.extra, ...extra };
    }
    if (choice.delta?.refusal) this.refusal += choice.delta.refusal;
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
      refusal: this.refusal === '' ? null : this.refusal,
    };
  }
}

/** Arguments always as JSON text (some servers send objects); a missing id gets a fresh one. */
export function normalizeToolCall(call: { id?: string | undefined; name: string; arguments: unknown; extra?: Record<string, unknown> | undefined }): LlmToolCall {
  const args = call.arguments;
  return {
    id: call.id || `call_${crypto.randomUUID().replace(/-/g, '').slice(0, 24)}`,
    name: call.name,
    arguments: typeof args === 'string' ? args : args == null ? '' : JSON.stringify(args),
    ...(call.extra ? { extra: call.extra } : {}),
  };
}

/**
 * Tokens as reported (0 when the server sent none). Cost: the provider's own figure when it
 * gives one (OpenRouter's `usage.cost`), else from the per-token prices, cached prompt tokens at
 * `cached_input_cost_per_token` (default: the input price).
 */
export function usageOf(usage: UsageLike | null | undefined, settings: LlmSettings): LlmResponse['usage'] {
  const prompt = count(usage?.prompt_tokens);
  const completion = count(usage?.completion_tokens);
  const cached = Math.min(prompt, count(usage?.prompt_tokens_details?.cached_tokens));
  const reasoning = Math.min(completion, count(usage?.completion_tokens_details?.reasoning_tokens));
  const inputPrice = settings.input_cost_per_token ?? 0;
  const computed = (prompt - cached) * inputPrice + cached * (settings.cached_input_cost_per_token ?? inputPrice) + completion * (settings.output_cost_per_token ?? 0);
  const reported = usage?.cost;
  const cost = typeof reported === 'number' && Number.isFinite(reported) && reported >= 0 ? reported : computed;
  return { prompt_tokens: prompt, completion_tokens: completion, cost, cached_tokens: cached, reasoning_tokens: reasoning };
}

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.floor(value) : 0;
}
