import { z } from 'zod';

/** Tokens and cost: of a conversation, a run, or one LLM call. */
export const Usage = z
  .object({
    prompt_tokens: z.int().min(0),
    completion_tokens: z.int().min(0),
    cost: z.number().min(0),
    cached_tokens: z.int().min(0).optional().describe('Prompt tokens the provider read from its cache (part of prompt_tokens).'),
    reasoning_tokens: z.int().min(0).optional().describe('Completion tokens spent reasoning (part of completion_tokens).'),
  })
  .meta({ id: 'Usage' });
export type Usage = z.infer<typeof Usage>;

/** The usage of one LLM call (or what is added to a total): every count present. */
export const LlmUsage = Usage.required();
export type LlmUsage = z.infer<typeof LlmUsage>;

/** A usage of nothing yet, every count present: a new conversation's, run's or subagent's. */
export function zeroUsage(): LlmUsage {
  return { prompt_tokens: 0, completion_tokens: 0, cost: 0, cached_tokens: 0, reasoning_tokens: 0 };
}
