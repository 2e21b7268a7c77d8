import { z } from 'zod';

export const ReasoningEffort = z.enum(['low', 'medium', 'high', 'none']);
export const MaxTokensParam = z.enum(['auto', 'max_tokens', 'max_completion_tokens']);
export const LlmApiName = z.enum(['chat', 'responses', 'anthropic']);
export const ReasoningSettings = z
  .object({
    effort: ReasoningEffort.optional(),
    show: z.boolean().optional().describe('Record and stream the reasoning text (default true).'),
    send_back: z.enum(['auto', 'always', 'never']).optional().describe('Send reasoning back in later requests: auto (as the provider requires), always, never.'),
  })
  .strict();
export const StructuredOutputMode = z.enum(['auto', 'json_schema', 'tool']);
/** Failure classes a request may fall back on (`llm.fallback_on`); authentication, billing and invalid requests are never among them. */
export const FallbackReason = z.enum(['overloaded', 'unavailable', 'timeout', 'server_error', 'rate_limited', 'context_window', 'content_filtered']);
export type FallbackReason = z.infer<typeof FallbackReason>;
export const DEFAULT_FALLBACK_ON: readonly FallbackReason[] = ['overloaded', 'unavailable', 'timeout', 'server_error'];
export const FallbackScope = z.enum(['call', 'turn', 'sticky']);
const FallbackModelFields = {
  model: z.string().min(1).max(256),
  base_url: z.url({ protocol: /^https?$/ }).max(2048).optional().describe("Default: the primary's base_url (and then its api_key)."),
  api: LlmApiName.optional(),
};
export const FallbackModelInput = z
  .object({ ...FallbackModelFields, api_key: z.string().min(1).max(4096).optional().describe('The key, or `${NAME}` to read it from the conversation\'s secrets.') })
  .strict();
export const FallbackModelShown = z.object({ ...FallbackModelFields, base_url: z.string().optional(), api_key: z.literal('**********').optional() });
export const RetryPolicy = z
  .object({
    max_attempts: z.int().min(1).max(20).optional().describe('Attempts per model, the first included (default: num_retries + 1).'),
    min_wait_s: z.number().min(0).max(600).optional().describe('First backoff step (default 1).'),
    max_wait_s: z.number().min(0).max(3600).optional().describe('Longest backoff step (default 30).'),
    honor_retry_after: z.boolean().optional().describe("Wait what the provider's retry-after says (default true)."),
  })
  .strict();
export type RetryPolicy = z.infer<typeof RetryPolicy>;

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

/**
 * Every LLM setting but the model and the key, declared once: what a client may send (`accepts`),
 * how a response shows it (`shows`, with its `description`). Every one is optional and nullable
 * (null: unset, the provider's or the server's default applies); the request, the response, the
 * stored config, their types and normalizeLlmConfig all derive from this list.
 */
const LLM_SETTINGS = {
  base_url: { accepts: z.url({ protocol: /^https?$/ }).max(2048), shows: z.string() },
  api_version: { accepts: z.string().max(64), shows: z.string() },
  temperature: { accepts: z.number().min(0).max(2), shows: z.number() },
  top_p: { accepts: z.number().min(0).max(1), shows: z.number() },
  max_output_tokens: { accepts: z.int().min(1).max(10_000_000), shows: z.int() },
  reasoning_effort: { accepts: ReasoningEffort, shows: ReasoningEffort },
  api: {
    accepts: LlmApiName,
    shows: LlmApiName,
    description: 'Wire protocol: `chat` (chat completions), `responses` (OpenAI Responses API), `anthropic` (Anthropic Messages API); default inferred from the provider.',
  },
  reasoning: {
    accepts: ReasoningSettings,
    shows: ReasoningSettings,
    description: 'How reasoning is asked for, shown and sent back: `{effort?, show?, send_back?}`.',
  },
  fallbacks: {
    accepts: z.array(FallbackModelInput).max(8),
    shows: z.array(FallbackModelShown),
    description: 'Models tried in order when a request to the primary fails with a reason of `fallback_on`: `[{model, base_url?, api_key?, api?}]`.',
  },
  fallback_on: {
    accepts: z.array(FallbackReason).max(7),
    shows: z.array(FallbackReason),
    description: 'Failures that move a request to the next model (default: overloaded, unavailable, timeout, server_error). Authentication, billing and invalid-request errors never do.',
  },
  fallback_scope: {
    accepts: FallbackScope,
    shows: FallbackScope,
    description: '`call` (default): each request starts at the primary; `turn`: stay on the fallback until the next user message; `sticky`: for the rest of the run.',
  },
  retry: { accepts: RetryPolicy, shows: RetryPolicy, description: 'How one model is retried before falling back: `{max_attempts, min_wait_s, max_wait_s, honor_retry_after}`.' },
  cooldown_s: {
    accepts: z.number().min(0).max(86_400),
    shows: z.number(),
    description: 'A model that failed with a fallback reason is skipped by every conversation of this server for this long (default 60; 0: never).',
  },
  timeout_s: { accepts: z.number().positive().max(3600), shows: z.number() },
  num_retries: { accepts: z.int().min(0).max(20), shows: z.int() },
  input_cost_per_token: { accepts: z.number().min(0), shows: z.number() },
  output_cost_per_token: { accepts: z.number().min(0), shows: z.number() },
  cached_input_cost_per_token: {
    accepts: z.number().min(0),
    shows: z.number(),
    description: 'Price of a prompt token read from the provider\'s cache (default: input_cost_per_token).',
  },
  stream: { accepts: z.boolean(), shows: z.boolean(), description: 'Stream answers (default true).' },
  stream_usage: {
    accepts: z.boolean(),
    shows: z.boolean(),
    description: 'Ask for usage in the stream with `stream_options` (default true; off for Azure api_version before 2024-10-21).',
  },
  max_tokens_param: {
    accepts: MaxTokensParam,
    shows: MaxTokensParam,
    description: 'Which field carries max_output_tokens (default auto: max_completion_tokens for OpenAI, Azure and reasoning models, max_tokens elsewhere).',
  },
  drop_params: {
    accepts: z.array(z.string().min(1).max(128)).max(64),
    shows: z.array(z.string()),
    description: 'Top-level request fields never sent, e.g. ["temperature"].',
  },
  extra_body: {
    accepts: ExtraBody,
    shows: z.record(z.string(), z.unknown()),
    description: 'Fields added to every request body (e.g. OpenRouter `provider`, vLLM `chat_template_kwargs`).',
  },
  extra_headers: {
    accepts: ExtraHeaders,
    shows: z.record(z.string(), z.string()),
    description: 'Headers sent with every request; values of auth/key/token-like names are shown as `**********`.',
  },
  prompt_cache: {
    accepts: z.boolean(),
    shows: z.boolean(),
    description: 'Mark the prompt prefix with `cache_control` (default: on for Claude models behind OpenRouter or LiteLLM).',
  },
  structured_output: {
    accepts: StructuredOutputMode,
    shows: StructuredOutputMode,
    description:
      'How a message\'s `output_schema` is asked for: `json_schema` (the provider\'s `response_format`), `tool` (a `final_output` tool whose parameters are the schema), `auto` (default: json_schema for OpenAI\'s and Azure\'s models that take it, else tool).',
  },
} satisfies Record<string, { accepts: z.ZodType; shows: z.ZodType; description?: string }>;

type Settings = typeof LLM_SETTINGS;
type SettingName = keyof Settings;
const SETTING_NAMES = Object.keys(LLM_SETTINGS) as SettingName[];

function settingsShape<Shape>(schemaOf: (name: SettingName) => z.ZodType): Shape {
  return Object.fromEntries(SETTING_NAMES.map((name) => [name, schemaOf(name)])) as Shape;
}

const acceptedSettings = settingsShape<{ [K in SettingName]: z.ZodOptional<z.ZodNullable<Settings[K]['accepts']>> }>((name) =>
  LLM_SETTINGS[name].accepts.nullable().optional(),
);
const shownSettings = settingsShape<{ [K in SettingName]: z.ZodNullable<Settings[K]['shows']> }>((name) => {
  const setting: { shows: z.ZodType; description?: string } = LLM_SETTINGS[name];
  return setting.description === undefined ? setting.shows.nullable() : setting.shows.nullable().describe(setting.description);
});

/** LLM settings as a client sends them (create body, PUT /config). */
export const LlmConfigInput = z
  .object({ model: z.string().min(1).max(256), ...acceptedSettings, api_key: z.string().min(1).max(4096).nullable().optional() })
  .strict()
  .meta({ id: 'LlmConfigRequest' });
export type LlmConfigInput = z.infer<typeof LlmConfigInput>;

export const REDACTED = '**********';

/** LLM settings as responses show them: the key is never returned. */
export const LlmConfigPublic = z
  .object({
    model: z.string(),
    api_key: z.literal(REDACTED).nullable().describe('`**********` when a key is set, null when not.'),
    ...shownSettings,
  })
  .meta({ id: 'LlmConfig' });
export type LlmConfigPublic = z.infer<typeof LlmConfigPublic>;

/** What the server keeps: every field present (null when unset), the key in plain text in memory only. */
export const LlmConfig = LlmConfigPublic.extend({
  api_key: z.string().nullable(),
  fallbacks: z.array(z.object({ ...FallbackModelFields, base_url: z.string().optional(), api_key: z.string().optional() })).nullable(),
});
export type LlmConfig = z.infer<typeof LlmConfig>;

/**
 * An LlmConfig as stored: fields added since it was written are missing there and read as null
 * (unset); anything else must have its type.
 */
export const StoredLlmConfig = LlmConfig.partial()
  .extend({ model: z.string() })
  .transform((stored) => normalizeLlmConfig(stored));

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
 * config (fields it lacks are unset). One object literal, not a loop over SETTING_NAMES: an object
 * given this many fields one computed key at a time becomes a hash table in V8, and every held
 * record keeps one (the P4 start-up figures in bench/RESULTS.md). Typed as LlmConfig, so the
 * compiler names a setting it lacks; the tests check its fields and their order against the list.
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
    api: input.api ?? null,
    reasoning: input.reasoning ?? null,
    fallbacks: input.fallbacks ?? null,
    fallback_on: input.fallback_on ?? null,
    fallback_scope: input.fallback_scope ?? null,
    retry: input.retry ?? null,
    cooldown_s: input.cooldown_s ?? null,
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
  const fallbacks = config.fallbacks ? config.fallbacks.map(({ api_key: key, ...rest }) => (key ? { ...rest, api_key: REDACTED } : rest) as z.infer<typeof FallbackModelShown>) : null;
  return { ...config, api_key: config.api_key ? REDACTED : null, extra_headers: headers, fallbacks };
}
