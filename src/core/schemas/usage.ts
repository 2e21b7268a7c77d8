import { z } from 'zod';

/** Tokens and cost: of a conversation, a run, or one LLM call. */
export const Usage = z
  .object({
    prompt_tokens: z.int().min(0),
    completion_tokens: z.int().min(0),
    cost: z.number().min(0),
    cached_tokens: z.int().min(0).optional().describe('Prompt tokens the provider read from its cache (part of prompt_tokens).'),
    reasoning_tokens: z.int().min(0).optional().describe('Completion tokens spent reasoning (part of completion_tokens, whatever the provider\'s convention).'),
    cache_write_tokens: z.int().min(0).optional().describe('Prompt tokens written to the provider\'s cache (part of prompt_tokens), where the provider reports them.'),
  })
  .meta({ id: 'Usage' });
export type Usage = z.infer<typeof Usage>;

/**
 * The usage of one LLM call (or what is added to a total): every count present but
 * `cache_write_tokens` (reported by few providers). `unknown`: the provider reported no usage at
 * all; the counts are zeros that count nothing, and the `usage` event says null.
 */
export const LlmUsage = Usage.required({ prompt_tokens: true, completion_tokens: true, cost: true, cached_tokens: true, reasoning_tokens: true }).extend({
  unknown: z.literal(true).optional(),
});
export type LlmUsage = z.infer<typeof LlmUsage>;

/** A usage of nothing yet, every count present: a new conversation's, run's or subagent's. */
export function zeroUsage(): LlmUsage {
  return { prompt_tokens: 0, completion_tokens: 0, cost: 0, cached_tokens: 0, reasoning_tokens: 0 };
}
