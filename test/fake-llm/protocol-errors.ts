import type { FakeFaultTurn } from './fake-llm-types.js';

/**
 * Error answers of the Responses and Messages APIs as documented (OpenAI's error codes guide,
 * Anthropic's errors page: `{"type": "error", "error": {"type", "message"}}`, 529 overloaded).
 */
export const PROTOCOL_ERRORS = {
  responses: {
    contextOverflow: {
      status: 400,
      body: { error: { message: 'Your input exceeds the context window of this model. Please adjust your input and try again.', type: 'invalid_request_error', param: 'input', code: 'context_length_exceeded' } },
    },
    rateLimited: {
      status: 429,
      body: { error: { message: 'Rate limit reached for gpt-5 in organization org-fake on tokens per min (TPM): Limit 30000, Used 30000, Requested 1200.', type: 'tokens', param: null, code: 'rate_limit_exceeded' } },
      retryAfter: 0,
    },
    serverError: {
      status: 500,
      body: { error: { message: 'The server had an error while processing your request. Sorry about that!', type: 'server_error', param: null, code: null } },
    },
  },
  anthropic: {
    contextOverflow: {
      status: 400,
      body: { type: 'error', error: { type: 'invalid_request_error', message: 'prompt is too long: 210000 tokens > 200000 maximum' } },
    },
    overloaded: {
      status: 529,
      body: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
    },
    creditTooLow: {
      status: 400,
      body: { type: 'error', error: { type: 'invalid_request_error', message: 'Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.' } },
    },
    rateLimited: {
      status: 429,
      body: { type: 'error', error: { type: 'rate_limit_error', message: 'This request would exceed the rate limit for your organization of 50 requests per minute.' } },
      retryAfter: 0,
    },
  },
} satisfies Record<string, Record<string, FakeFaultTurn>>;
