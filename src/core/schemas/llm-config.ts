import { z } from 'zod';

export const ReasoningEffort = z.enum(['low', 'medium', 'high', 'none']);

const llmFields = {
  model: z.string().min(1).max(256),
  base_url: z.url({ protocol: /^https?$/ }).max(2048).nullable().optional(),
  api_version: z.string().max(64).nullable().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().min(0).max(1).nullable().optional(),
  max_output_tokens: z.int().min(1).max(10_000_000).nullable().optional(),
  reasoning_effort: ReasoningEffort.nullable().optional(),
  timeout_s: z.number().positive().max(3600).nullable().optional(),
  num_retries: z.int().min(0).max(20).nullable().optional(),
  input_cost_per_token: z.number().min(0).nullable().optional(),
  output_cost_per_token: z.number().min(0).nullable().optional(),
};

/** LLM settings as a client sends them (create body, PUT /config). */
export const LlmConfigInput = z
  .object({ ...llmFields, api_key: z.string().min(1).max(4096).nullable().optional() })
  .strict()
  .meta({ id: 'LlmConfigRequest' });
export type LlmConfigInput = z.infer<typeof LlmConfigInput>;

export const REDACTED = '**********';

/** LLM settings as responses show them: the key is never returned. */
export const LlmConfigPublic = z
  .object({
    model: z.string(),
    api_key: z.literal(REDACTED).nullable().describe('`**********` when a key is set, null when not.'),
    base_url: z.string().nullable(),
    api_version: z.string().nullable(),
    temperature: z.number().nullable(),
    top_p: z.number().nullable(),
    max_output_tokens: z.int().nullable(),
    reasoning_effort: ReasoningEffort.nullable(),
    timeout_s: z.number().nullable(),
    num_retries: z.int().nullable(),
    input_cost_per_token: z.number().nullable(),
    output_cost_per_token: z.number().nullable(),
  })
  .meta({ id: 'LlmConfig' });
export type LlmConfigPublic = z.infer<typeof LlmConfigPublic>;

/** What the server keeps: every field present (null when unset), the key in plain text in memory only. */
export type LlmConfig = Omit<LlmConfigPublic, 'api_key'> & { api_key: string | null };

export function normalizeLlmConfig(input: LlmConfigInput): LlmConfig {
  return {
    model: input.model,
    api_key: input.api_key ?? null,
    base_url: input.base_url ?? null,
    api_version: input.api_version ?? null,
    temperature: input.temperature ?? null,
    top_p: input.top_p ?? null,
    max_output_tokens: input.max_output_tokens ?? null,
    reasoning_effort: input.reasoning_effort ?? null,
    timeout_s: input.timeout_s ?? null,
    num_retries: input.num_retries ?? null,
    input_cost_per_token: input.input_cost_per_token ?? null,
    output_cost_per_token: input.output_cost_per_token ?? null,
  };
}

/**
 * Merge a partial update into a config: fields the client sent replace, others stay. A key never
 * follows the endpoint to a new address: when the update changes `base_url` without giving
 * `api_key`, the key (the conversation's, or the server's default) is dropped rather than sent to
 * a URL it was never meant for.
 */
export function mergeLlmConfig(current: LlmConfig | null, update: LlmConfigInput): LlmConfig {
  const next = normalizeLlmConfig(update);
  if (!current) return next;
  const merged: LlmConfig = { ...current };
  for (const key of Object.keys(update) as (keyof LlmConfigInput)[]) {
    (merged as Record<string, unknown>)[key] = next[key];
  }
  if (update.base_url !== undefined && next.base_url !== current.base_url && update.api_key === undefined) merged.api_key = null;
  return merged;
}

export function redactLlmConfig(config: LlmConfig): LlmConfigPublic {
  return { ...config, api_key: config.api_key ? REDACTED : null };
}
