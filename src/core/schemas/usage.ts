import { z } from 'zod';

/** Tokens and cost, without the split by model. */
export const UsageCounts = z
  .object({
    prompt_tokens: z.int().min(0),
    completion_tokens: z.int().min(0),
    cost: z.number().min(0),
    cached_tokens: z.int().min(0).optional().describe('Prompt tokens the provider read from its cache (part of prompt_tokens).'),
    reasoning_tokens: z.int().min(0).optional().describe('Completion tokens spent reasoning (part of completion_tokens, whatever the provider\'s convention).'),
    cache_write_tokens: z.int().min(0).optional().describe('Prompt tokens written to the provider\'s cache (part of prompt_tokens), where the provider reports them.'),
  })
  .meta({ id: 'UsageCounts' });

/** Tokens and cost: of a conversation, a run, or one LLM call. */
export const Usage = UsageCounts.extend({
  by_model: z.record(z.string(), UsageCounts).optional().describe('The same counts by the model that answered (present once one answered; fallbacks appear here).'),
}).meta({ id: 'Usage' });
export type Usage = z.infer<typeof Usage>;

/**
 * The usage of one LLM call (or what is added to a total): every count present but
 * `cache_write_tokens` (reported by few providers). `unknown`: the provider reported no usage at
 * all; the counts are zeros that count nothing, and the `usage` event says null.
 */
export const LlmUsage = UsageCounts.required({ prompt_tokens: true, completion_tokens: true, cost: true, cached_tokens: true, reasoning_tokens: true }).extend({
  unknown: z.literal(true).optional(),
});
export type LlmUsage = z.infer<typeof LlmUsage>;

/** A usage of nothing yet, every count present: a new conversation's, run's or subagent's. */
export function zeroUsage(): LlmUsage {
  return { prompt_tokens: 0, completion_tokens: 0, cost: 0, cached_tokens: 0, reasoning_tokens: 0 };
}

/** Adds `usage` to `target` in place, and to its `by_model` entry when the model is known. */
export function addUsageTo(target: Usage, usage: LlmUsage, model?: string): void {
  addCounts(target, usage);
  if (model === undefined) return;
  target.by_model ??= {};
  addCounts((target.by_model[model] ??= zeroUsage()), usage);
}

function addCounts(target: z.infer<typeof UsageCounts>, usage: LlmUsage): void {
  target.prompt_tokens += usage.prompt_tokens;
  target.completion_tokens += usage.completion_tokens;
  target.cost += usage.cost;
  target.cached_tokens = (target.cached_tokens ?? 0) + usage.cached_tokens;
  target.reasoning_tokens = (target.reasoning_tokens ?? 0) + usage.reasoning_tokens;
  if (usage.cache_write_tokens) target.cache_write_tokens = (target.cache_write_tokens ?? 0) + usage.cache_write_tokens;
}
