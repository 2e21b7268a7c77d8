import type { FakeFaultTurn } from './fake-llm-types.js';

/**
 * Error answers as providers send them (documented shapes), for the fake LLM: each profile's
 * quirk is what agentd must recognise. Sizes and numbers are the providers' own examples.
 */
export const PROVIDER_ERRORS = {
  openai: {
    contextOverflow: {
      status: 400,
      body: { error: { message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.", type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' } },
    },
    insufficientQuota: {
      status: 429,
      body: { error: { message: 'You exceeded your current quota, please check your plan and billing details.', type: 'insufficient_quota', param: null, code: 'insufficient_quota' } },
    },
    rateLimitedWithReset: {
      status: 429,
      body: { error: { message: 'Rate limit reached for requests', type: 'requests', param: null, code: 'rate_limit_exceeded' } },
      headers: { 'x-ratelimit-reset-requests': '150ms', 'x-ratelimit-reset-tokens': '40ms' },
    },
  },
  azure: {
    contextOverflow: {
      status: 400,
      body: { error: { message: "This model's maximum context length is 8192 tokens, however you requested 9000 tokens.", type: 'invalid_request_error', param: 'messages', code: 'context_length_exceeded' } },
    },
  },
  vllm: {
    contextOverflow: {
      status: 400,
      body: { object: 'error', message: "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.", type: 'BadRequestError', param: null, code: 400 },
    },
  },
  anthropicCompatible: {
    contextOverflow: {
      status: 400,
      body: { type: 'error', error: { type: 'invalid_request_error', message: 'prompt is too long: 210000 tokens > 200000 maximum' } },
    },
  },
  gemini: {
    // Gemini's OpenAI-compatible endpoint wraps the error object in an array.
    contextOverflow: {
      status: 400,
      body: [{ error: { code: 400, message: 'The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).', status: 'INVALID_ARGUMENT' } }],
    },
    badRequest: {
      status: 400,
      body: [{ error: { code: 400, message: 'Invalid JSON payload received. Unknown name "exclusiveMinimum" at \'tools[0].function_declarations[0].parameters\'', status: 'INVALID_ARGUMENT' } }],
    },
  },
} satisfies Record<string, Record<string, FakeFaultTurn>>;
