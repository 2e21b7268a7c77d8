/**
 * Provider profiles for the fake LLM: each reproduces what one real endpoint does differently
 * from OpenAI's textbook behaviour, as that provider documents it (or as its users reported it).
 * A profile adds what the provider rejects (with its own error shape) and how it shapes answers.
 *
 *   const fake = await startFakeLlm({ script, provider: 'gemini' });
 */
import type { ChatRequestBody, RecordedRequest } from './fake-llm-types.js';
import { recordedBody } from './recordings.js';

export const PROVIDER_NAMES = ['openai', 'azure-legacy', 'gemini', 'ollama', 'vllm', 'openrouter', 'litellm', 'deepseek', 'dashscope', 'xai', 'groq', 'mistral'] as const;
export type ProviderName = (typeof PROVIDER_NAMES)[number];

export interface ProviderProfile {
  /** Problems this provider rejects the request for (beyond the strict OpenAI checks). */
  reject?(request: RecordedRequest, issued: ReadonlyMap<string, Record<string, unknown>>): string[];
  /** The 400 body for those problems. */
  errorBody?(message: string): unknown;
  /** Fields the provider adds to each tool call it makes (sent again by a correct client). */
  toolCallExtra?(callId: string): Record<string, unknown>;
  systemFingerprint?: string;
  /** SSE comment lines sent before the first chunk (OpenRouter's keep-alives). */
  sseComments?: string[];
  /** Usage rides on the finish chunk instead of a chunk of its own. */
  usageOnFinishChunk?: boolean;
  /** Each tool call arrives whole in one chunk, without `index`. */
  wholeToolCalls?: boolean;
  /** The finish reason it gives when the answer has tool calls. */
  toolCallsFinishReason?: string;
  /** Extra usage fields (cost, cached and reasoning token details). */
  usageDetails?(usage: { prompt_tokens: number; completion_tokens: number }): Record<string, unknown>;
  /** The context window: a longer prompt is cut from the start, and the usage says so. */
  contextTokens?: number;
  /** Streams carry reasoning text in this delta field. */
  reasoningField?: string;
}

const REASONING_MODEL = /^(?:.*\/)?(?:o[1-9](?:$|[-.])|gpt-5(?!.*chat))/i;

/** The JSON Schema keywords Gemini's function declarations accept (its OpenAPI 3.0 subset). */
const GEMINI_SCHEMA_KEYS = new Set([
  'type', 'format', 'title', 'description', 'nullable', 'enum', 'maxItems', 'minItems', 'properties', 'required',
  'minProperties', 'maxProperties', 'minLength', 'maxLength', 'pattern', 'example', 'anyOf', 'propertyOrdering',
  'default', 'items', 'minimum', 'maximum',
]);

export const PROVIDER_PROFILES: Record<ProviderName, ProviderProfile> = {
  openai: {
    // o-series and gpt-5: "Unsupported parameter: 'max_tokens' is not supported with this model."
    reject({ body }) {
      if (typeof body.model !== 'string' || !REASONING_MODEL.test(body.model)) return [];
      const problems: string[] = [];
      if (body.max_tokens !== undefined) problems.push("Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.");
      for (const field of ['temperature', 'top_p']) {
        if (body[field] !== undefined && body[field] !== 1) problems.push(`Unsupported value: '${field}' does not support ${String(body[field])} with this model.`);
      }
      return problems;
    },
  },
  'azure-legacy': {
    // api-version before 2024-10-21: neither field existed yet.
    reject({ body, query }) {
      const version = query['api-version'] ?? '';
      if (!/^\d{4}-\d{2}-\d{2}/.test(version) || version.slice(0, 10) >= '2024-10-21') return [];
      return ['stream_options', 'max_completion_tokens'].filter((field) => body[field] !== undefined).map((field) => `Unrecognized request argument supplied: ${field}`);
    },
  },
  gemini: {
    reject({ body }, issued) {
      return [...geminiSchemaProblems(body), ...missingSignatures(body, issued)];
    },
    errorBody: (message) => [{ error: { code: 400, message, status: 'INVALID_ARGUMENT' } }],
    toolCallExtra: (callId) => ({ extra_content: { google: { thought_signature: `sig-${callId}-${'x'.repeat(16)}` } } }),
  },
  ollama: {
    systemFingerprint: 'fp_ollama',
    wholeToolCalls: true,
    toolCallsFinishReason: 'stop',
    contextTokens: 4096, // Ollama's default num_ctx on a small machine
  },
  vllm: {
    errorBody: (message) => ({ object: 'error', message, type: 'BadRequestError', param: null, code: 400 }),
    reasoningField: 'reasoning_content',
  },
  openrouter: {
    sseComments: [': OPENROUTER PROCESSING', ': OPENROUTER PROCESSING'],
    usageDetails: (usage) => ({
      cost: (usage.prompt_tokens * 3 + usage.completion_tokens * 15) / 1_000_000,
      prompt_tokens_details: { cached_tokens: Math.floor(usage.prompt_tokens / 2) },
      completion_tokens_details: { reasoning_tokens: Math.floor(usage.completion_tokens / 3) },
    }),
    reasoningField: 'reasoning',
  },
  deepseek: {
    // Thinking mode: every assistant message of a tool loop must carry its reasoning_content back
    // (recordings/deepseek-reasoning-not-sent-back.json is the answer users reported).
    reject({ body }) {
      const missing = (body.messages ?? []).some((message) => message.role === 'assistant' && Array.isArray(message.tool_calls) && (typeof message.reasoning_content !== 'string' || message.reasoning_content === ''));
      return missing ? [DEEPSEEK_NOT_SENT_BACK().error.message] : [];
    },
    errorBody: (message) => ({ error: { ...DEEPSEEK_NOT_SENT_BACK().error, message } }),
    reasoningField: 'reasoning_content',
    usageDetails: (usage) => ({
      prompt_tokens_details: { cached_tokens: Math.floor(usage.prompt_tokens / 2) },
      prompt_cache_hit_tokens: Math.floor(usage.prompt_tokens / 2),
      prompt_cache_miss_tokens: usage.prompt_tokens - Math.floor(usage.prompt_tokens / 2),
    }),
  },
  // Alibaba Cloud Model Studio (DashScope), Qwen3 with `enable_thinking`: reasoning in `reasoning_content`, none expected back.
  dashscope: {
    reasoningField: 'reasoning_content',
  },
  xai: {
    reasoningField: 'reasoning_content',
  },
  groq: {
    // Groq validates message fields: "property 'reasoning_content' is unsupported" (its own field is `reasoning`).
    reject: ({ body }) => unsupportedMessageFields(body, ['reasoning_content', 'reasoning_details']).map(([i, field]) => `'messages.${i}' : for 'role:assistant' the following must be satisfied[('messages.${i}' : property '${field}' is unsupported)]`),
    reasoningField: 'reasoning',
  },
  mistral: {
    // Mistral's API forbids fields it does not know (pydantic: "Extra inputs are not permitted").
    reject: ({ body }) => unsupportedMessageFields(body, ['reasoning_content', 'reasoning', 'reasoning_details']).map(([i, field]) => `Body.messages.${i}.assistant.${field}: Extra inputs are not permitted`),
    wholeToolCalls: true,
  },
  litellm: {
    usageOnFinishChunk: true,
    usageDetails: (usage) => ({
      prompt_tokens_details: { cached_tokens: Math.floor(usage.prompt_tokens / 4) },
      completion_tokens_details: { reasoning_tokens: 0 },
    }),
  },
};

/** DeepSeek's recorded refusal, read at its first use: the benchmarks bundle this module where the recordings are not. */
let deepseekNotSentBack: { error: { message: string; type: string; param: null; code: string } } | undefined;
const DEEPSEEK_NOT_SENT_BACK = () => (deepseekNotSentBack ??= recordedBody('deepseek-reasoning-not-sent-back') as { error: { message: string; type: string; param: null; code: string } });

/** The assistant messages that carry one of these fields: [index, field]. */
function unsupportedMessageFields(body: ChatRequestBody, fields: string[]): [number, string][] {
  const found: [number, string][] = [];
  (body.messages ?? []).forEach((message, i) => {
    if (message.role !== 'assistant') return;
    for (const field of fields) if (message[field] !== undefined) found.push([i, field]);
  });
  return found;
}

function geminiSchemaProblems(body: ChatRequestBody): string[] {
  const problems: string[] = [];
  const walk = (schema: unknown, where: string): void => {
    if (!schema || typeof schema !== 'object' || Array.isArray(schema)) return;
    for (const [key, value] of Object.entries(schema)) {
      if (!GEMINI_SCHEMA_KEYS.has(key)) problems.push(`Invalid JSON payload received. Unknown name "${key}" at '${where}': Cannot find field.`);
      else if (key === 'properties' && value && typeof value === 'object') {
        for (const [name, property] of Object.entries(value)) walk(property, `${where}.properties[${name}].value`);
      } else if (key === 'items') walk(value, `${where}.items`);
      else if (key === 'anyOf' && Array.isArray(value)) value.forEach((option, i) => walk(option, `${where}.any_of[${i}]`));
    }
  };
  (body.tools ?? []).forEach((tool, i) => walk(tool.function?.parameters, `tools[${i}].function_declarations[0].parameters`));
  return problems;
}

/** Gemini 3: every function call it made must come back with its thought signature. */
function missingSignatures(body: ChatRequestBody, issued: ReadonlyMap<string, Record<string, unknown>>): string[] {
  const problems: string[] = [];
  for (const message of body.messages ?? []) {
    for (const call of message.tool_calls ?? []) {
      const expected = issued.get(call.id);
      if (!expected) continue;
      const sent = (call as unknown as Record<string, unknown>).extra_content;
      if (JSON.stringify(sent) !== JSON.stringify(expected.extra_content)) {
        problems.push(`Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly (call ${call.id}).`);
      }
    }
  }
  return problems;
}
