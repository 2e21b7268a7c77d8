import { z } from 'zod';

export const ReasoningEffort = z.enum(['low', 'medium', 'high', 'none']);
export const MaxTokensParam = z.enum(['auto', 'max_tokens', 'max_completion_tokens']);
export const StructuredOutputMode = z.enum(['auto', 'json_schema', 'tool']);

/** Fields the request body is built from: `extra_body` may add fields, never replace these. */
const RESERVED_BODY_FIELDS = new Set(['model', 'messages', 'tools', 'stream', 'tool_choice']);
/** Headers the HTTP client owns. */
const RESERVED_HEADERS = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'content-type', 'accept-encoding']);
/** Header names whose values are shown redacted, like `api_key`. */
export const SENSITIVE_HEADER = /auth|key|token|secret|cookie|password/i;

export const ExtraBody = z
  .record(z.string().max(128), z.unknown())
  .refine((body) => Object.keys(body).every((key) => !RESERVED_BODY_FIELDS.has(key)), {
    message: `extra_body cannot set ${[...RESERVED_BODY_FIELDS].join(', ')}`,
  })
  .refine((body) => JSON.stringify(body).length <= 64 * 1024, { message: 'extra_body is larger than 64 KiB' });
export const ExtraHeaders = z
  .record(z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/, 'a header name is letters, digits and - _ . only'), z.string().max(8192).regex(/^[^\r\n\0]*$/, 'a header value has no line breaks'))
  .refine((headers) => Object.keys(headers).every((key) => !RESERVED_HEADERS.has(key.toLowerCase())), {
    message: `extra_headers cannot set ${[...RESERVED_HEADERS].join(', ')}`,
  });

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
  cached_input_cost_per_token: z.number().min(0).nullable().optional(),
  stream: z.boolean().nullable().optional(),
  stream_usage: z.boolean().nullable().optional(),
  max_tokens_param: MaxTokensParam.nullable().optional(),
  drop_params: z.array(z.string().min(1).max(128)).max(64).nullable().optional(),
  extra_body: ExtraBody.nullable().optional(),
  extra_headers: ExtraHeaders.nullable().optional(),
  prompt_cache: z.boolean().nullable().optional(),
  structured_output: StructuredOutputMode.nullable().optional(),
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
    cached_input_cost_per_token: z.number().nullable().describe('Price of a prompt token read from the provider\'s cache (default: input_cost_per_token).'),
    stream: z.boolean().nullable().describe('Stream answers (default true).'),
    stream_usage: z.boolean().nullable().describe('Ask for usage in the stream with `stream_options` (default true; off for Azure api_version before 2024-10-21).'),
    max_tokens_param: MaxTokensParam.nullable().describe('Which field carries max_output_tokens (default auto: max_completion_tokens for OpenAI, Azure and reasoning models, max_tokens elsewhere).'),
    drop_params: z.array(z.string()).nullable().describe('Top-level request fields never sent, e.g. ["temperature"].'),
    extra_body: z.record(z.string(), z.unknown()).nullable().describe('Fields added to every request body (e.g. OpenRouter `provider`, vLLM `chat_template_kwargs`).'),
    extra_headers: z.record(z.string(), z.string()).nullable().describe('Headers sent with every request; values of auth/key/token-like names are shown as `**********`.'),
    prompt_cache: z.boolean().nullable().describe('Mark the prompt prefix with `cache_control` (default: on for Claude models behind OpenRouter or LiteLLM).'),
    structured_output: StructuredOutputMode.nullable().describe(
      'How a message\'s `output_schema` is asked for: `json_schema` (the provider\'s `response_format`), `tool` (a `final_output` tool whose parameters are the schema), `auto` (default: json_schema for OpenAI\'s and Azure\'s models that take it, else tool).',
    ),
  })
  .meta({ id: 'LlmConfig' });
export type LlmConfigPublic = z.infer<typeof LlmConfigPublic>;

/** What the server keeps: every field present (null when unset), the key in plain text in memory only. */
export const LlmConfig = LlmConfigPublic.extend({ api_key: z.string().nullable() });
export type LlmConfig = z.infer<typeof LlmConfig>;

/**
 * An LlmConfig as stored: fields added since it was written are missing there and read as null
 * (unset); anything else must have its type.
 */
export const StoredLlmConfig = LlmConfig.partial()
  .extend({ model: z.string() })
  .transform(normalizeLlmConfig);

/** An LlmConfig as kept compactly: without the fields that are unset (null). */
export type CompactLlmConfig = Partial<LlmConfig> & { model: string };

/** The config without its unset fields (most of them, usually), as normalizeLlmConfig takes it back. */
export function withoutUnsetLlmFields(config: LlmConfig): CompactLlmConfig {
  const compact: CompactLlmConfig = { model: config.model };
  for (const [key, value] of Object.entries(config)) if (value !== null) (compact as Record<string, unknown>)[key] = value;
  return compact;
}

/**
 * The config with every field set, unset ones null: from a request, and from a stored or compact
 * config (fields it lacks are unset). One literal, every field in the object itself: a copy of a
 * template with the given fields spread over it kept most of them in a second array (23-37 bytes
 * more for each loaded record).
 */
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
    cached_input_cost_per_token: input.cached_input_cost_per_token ?? null,
    stream: input.stream ?? null,
    stream_usage: input.stream_usage ?? null,
    max_tokens_param: input.max_tokens_param ?? null,
    drop_params: input.drop_params ?? null,
    extra_body: input.extra_body ?? null,
    extra_headers: input.extra_headers ?? null,
    prompt_cache: input.prompt_cache ?? null,
    structured_output: input.structured_output ?? null,
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
  const headers = config.extra_headers
    ? Object.fromEntries(Object.entries(config.extra_headers).map(([name, value]) => [name, SENSITIVE_HEADER.test(name) ? REDACTED : value]))
    : null;
  return { ...config, api_key: config.api_key ? REDACTED : null, extra_headers: headers };
}
