// The LLM client: OpenAI-compatible chat completions over undici, with retries by error class.
export { OpenAiLlmClient, type OpenAiLlmClientOptions } from './openai-llm.js';
