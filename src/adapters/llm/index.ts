// The LLM client: chat completions, OpenAI's Responses API and Anthropic's Messages API over undici, chosen per request by `llm.api`, with retries by policy and fallback models.
export { OpenAiLlmClient, type OpenAiLlmClientOptions } from './openai-llm.js';
export { ProtocolLlmClient, llmApiOf, loadLlmModules } from './protocol-llm-client.js';
export { ResponsesLlmClient } from './responses-llm.js';
export { AnthropicLlmClient } from './anthropic-llm.js';
export { FallbackLlmClient, type FallbackAttempt } from './fallback-llm.js';
export { ModelCooldowns } from './model-cooldowns.js';
export { historyForTarget, sameOrigin, type LlmOrigin } from './history-for-target.js';
export { failureReasonOf } from './failure-reason.js';
