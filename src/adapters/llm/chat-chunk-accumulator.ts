/**
 * Reassembles a streamed Chat Completions response (the OpenAI wire format, typed structurally so
 * only openai-llm.ts imports the SDK): text deltas, tool calls whose pieces arrive by `index`, the
 * finish reason and the usage chunk.
 */
import type { LlmReasoning, LlmResponse, LlmSettings, LlmToolCall } from '../../core/agent/llm.js';
import { ReasoningAccumulator, readContent } from './chat-reasoning.js';

export interface ChatChunkLike {
  choices?: Array<{
    delta?: {
      /** Text, or (Mistral's magistral models) an array of `text` and `thinking` parts. */
      content?: unknown;
      refusal?: string | null;
      reasoning_content?: unknown;
      reasoning?: unknown;
      reasoning_details?: unknown;
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
  total_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number | null; cache_write_tokens?: number | null } | null;
  completion_tokens_details?: { reasoning_tokens?: number | null } | null;
  /** DeepSeek's name for cached prompt tokens. */
  prompt_cache_hit_tokens?: number | null;
  /** Anthropic's names, as LiteLLM passes them through. */
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
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

/** What one chunk brought: assistant text and reasoning text ('' when none). */
export interface ChunkDelta {
  text: string;
  reasoning: string;
}

export class ChatChunkAccumulator {
  private content = '';
  private refusal = '';
  private readonly reasoning = new ReasoningAccumulator();
  private readonly otherParts: unknown[] = [];
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

  /** Adds a chunk; returns the text and the reasoning it brought. */
  add(chunk: ChatChunkLike): ChunkDelta {
    this.chunkCount++;
    if (chunk.usage) this.usage = chunk.usage;
    if (chunk.system_fingerprint) this.fingerprint = chunk.system_fingerprint;
    const choice = chunk.choices?.[0];
    if (!choice) return NOTHING;
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
    if (!choice.delta) return NOTHING;
    const content = readContent(choice.delta.content);
    this.content += content.text;
    this.refusal += content.refusal;
    this.otherParts.push(...content.otherParts);
    const reasoning = this.reasoning.add(choice.delta, content.thinking);
    return content.text === '' && reasoning === '' ? NOTHING : { text: content.text, reasoning };
  }

  result(settings: LlmSettings, origin?: LlmReasoning['origin']): LlmResponse {
    return {
      content: this.content === '' ? null : this.content,
      toolCalls: this.calls.filter((call) => call.name || call.arguments).map(normalizeToolCall),
      usage: usageOf(this.usage, settings),
      finishReason: this.finishReason,
      refusal: this.refusal === '' ? null : this.refusal,
      reasoning: this.reasoning.result(origin),
      ...(this.otherParts.length > 0 ? { otherParts: this.otherParts } : {}),
    };
  }
}

const NOTHING: ChunkDelta = Object.freeze({ text: '', reasoning: '' });

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
 * Tokens as reported, by the provider's convention: reasoning tokens are part of
 * `completion_tokens` (OpenAI, DeepSeek) or counted beside them (xAI: its `total_tokens` is
 * prompt + completion + reasoning), and agentd's `completion_tokens` always includes them.
 * Cached prompt tokens: `prompt_tokens_details.cached_tokens` (OpenAI), `prompt_cache_hit_tokens`
 * (DeepSeek), `cache_read_input_tokens` (Anthropic through LiteLLM); tokens written to the cache:
 * `cache_write_tokens` (OpenRouter) or `cache_creation_input_tokens`. An answer without usage is
 * `unknown` (zeros that are not a count). Cost: the provider's own figure when it gives one
 * (OpenRouter's `usage.cost`), else from the per-token prices, cached prompt tokens at
 * `cached_input_cost_per_token` (default: the input price).
 */
export function usageOf(usage: UsageLike | null | undefined, settings: LlmSettings): LlmResponse['usage'] {
  const prompt = count(usage?.prompt_tokens);
  let completion = count(usage?.completion_tokens);
  const cached = Math.min(prompt, count(usage?.prompt_tokens_details?.cached_tokens) || count(usage?.prompt_cache_hit_tokens) || count(usage?.cache_read_input_tokens));
  const cacheWrite = count(usage?.prompt_tokens_details?.cache_write_tokens) || count(usage?.cache_creation_input_tokens);
  const reported = count(usage?.completion_tokens_details?.reasoning_tokens);
  // xAI: the reasoning was not in completion_tokens; the total says so.
  const total = count(usage?.total_tokens);
  if (reported > 0 && total > 0 && total >= prompt + completion + reported) completion += reported;
  const reasoning = Math.min(completion, reported);
  const inputPrice = settings.input_cost_per_token ?? 0;
  const computed = (prompt - cached) * inputPrice + cached * (settings.cached_input_cost_per_token ?? inputPrice) + completion * (settings.output_cost_per_token ?? 0);
  const reportedCost = usage?.cost;
  const cost = typeof reportedCost === 'number' && Number.isFinite(reportedCost) && reportedCost >= 0 ? reportedCost : computed;
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    cost,
    cached_tokens: cached,
    reasoning_tokens: reasoning,
    ...(cacheWrite > 0 ? { cache_write_tokens: cacheWrite } : {}),
    ...(usage ? {} : { unknown: true as const }),
  };
}

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.floor(value) : 0;
}
