// The LLM client: OpenAI-compatible chat completions over undici, with retries by policy and fallback models.
export { OpenAiLlmClient, type OpenAiLlmClientOptions } from './openai-llm.js';
export { FallbackLlmClient, type FallbackAttempt } from './fallback-llm.js';
export { ModelCooldowns } from './model-cooldowns.js';
export { historyForTarget, sameOrigin, type LlmOrigin } from './history-for-target.js';
export { failureReasonOf } from './failure-reason.js';
