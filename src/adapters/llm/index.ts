// The LLM client: chat completions, OpenAI's Responses API and Anthropic's Messages API over undici, chosen per request by `llm.api`, with retries by error class.
export { OpenAiLlmClient, type OpenAiLlmClientOptions } from './openai-llm.js';
export { ProtocolLlmClient, llmApiOf } from './protocol-llm-client.js';
export { ResponsesLlmClient } from './responses-llm.js';
export { AnthropicLlmClient } from './anthropic-llm.js';
