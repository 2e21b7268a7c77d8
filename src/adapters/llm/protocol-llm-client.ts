/**
 * The one LlmClient compose.ts creates: each request goes to the client of its wire protocol
 * (`llm.api`, else inferred from the provider: see llmApiOf). The history keeps every message
 * in the chat client's wire form, the common form each protocol converts from at request time;
 * a message that carries reasoning is kept as the message itself, so its provider payloads
 * (signatures, encrypted items) reach the protocol that sends them back exactly as they came.
 */
import { withRequestChanges, type LlmApi, type LlmClient, type LlmMessage, type LlmMessageCodec, type LlmRequest, type LlmResponse, type LlmSettings } from '../../core/agent/llm.js';
import { AnthropicLlmClient } from './anthropic-llm.js';
import { WIRE_MESSAGE_CODEC } from './chat-message-codec.js';
import { historyForTarget, sameOrigin, type LlmOrigin } from './history-for-target.js';
import { loadChatModules, OpenAiLlmClient, type OpenAiLlmClientOptions } from './openai-llm.js';
import { loadProtocolModules, type ProtocolClientOptions } from './protocol-attempts.js';
import { ResponsesLlmClient } from './responses-llm.js';

/** The chat codec, but a message with reasoning stays an object (the chat wire form has no place for every provider's payload). */
export const PROTOCOL_MESSAGE_CODEC: LlmMessageCodec = {
  encode: (message) => (message.role === 'assistant' && message.reasoning ? null : WIRE_MESSAGE_CODEC.encode(message)),
  decode: (text) => WIRE_MESSAGE_CODEC.decode(text),
};

/**
 * The protocol of a request: `api` when set; Anthropic's own host speaks the Messages API;
 * everything else chat completions (the Responses API is chosen with `api: responses`).
 */
export function llmApiOf(settings: LlmSettings): LlmApi {
  if (settings.api) return settings.api;
  const host = hostOf(settings.base_url);
  if (host === 'api.anthropic.com' || host?.endsWith('.anthropic.com')) return 'anthropic';
  return 'chat';
}

/** Loads the modules a first request with these settings loads (an SDK, undici), before it is made. */
export function loadLlmModules(settings: LlmSettings): Promise<unknown> {
  return llmApiOf(settings) === 'chat' ? loadChatModules() : loadProtocolModules();
}

export class ProtocolLlmClient implements LlmClient {
  readonly codec = PROTOCOL_MESSAGE_CODEC;
  private readonly chat: OpenAiLlmClient;
  private readonly responses: ResponsesLlmClient;
  private readonly anthropic: AnthropicLlmClient;

  constructor(options: OpenAiLlmClientOptions = {}) {
    const shared: ProtocolClientOptions & { stream?: boolean } = {};
    for (const name of ['retryBaseDelayMs', 'retryMaxDelayMs', 'maxRetryAfterMs', 'defaultNumRetries', 'defaultTimeoutS', 'idleTimeoutMs', 'rateLimitWaitMs', 'random', 'stream'] as const) {
      if (options[name] !== undefined) (shared as Record<string, unknown>)[name] = options[name];
    }
    this.chat = new OpenAiLlmClient(options);
    this.responses = new ResponsesLlmClient(shared);
    this.anthropic = new AnthropicLlmClient(shared);
  }

  complete(given: LlmRequest): Promise<LlmResponse> {
    const api = llmApiOf(given.settings);
    const request = forTarget(given, { api, model: given.settings.model, ...(given.settings.base_url ? { baseUrl: given.settings.base_url } : {}) });
    if (api === 'responses') return this.responses.complete(request);
    if (api === 'anthropic') return this.anthropic.complete(request);
    // The chat client sends the history's texts as they are: they are its own codec's.
    const encoded = request.encoded?.codec === PROTOCOL_MESSAGE_CODEC ? { ...request.encoded, codec: WIRE_MESSAGE_CODEC } : request.encoded;
    return this.chat.complete(encoded ? withRequestChanges(request, { encoded }) : request);
  }

  supportsJsonSchema(settings: LlmSettings): boolean {
    const api = llmApiOf(settings);
    if (api !== 'chat' && settings.structured_output === 'tool') return false;
    if (api === 'responses') return this.responses.supportsJsonSchema();
    if (api === 'anthropic') return this.anthropic.supportsJsonSchema();
    return this.chat.supportsJsonSchema(settings);
  }
}

/**
 * The request as `target` accepts it: unchanged when every turn with reasoning came from it
 * (turns without an origin are taken as its own), else with the history converted and sent as
 * objects (the kept texts are another protocol's form).
 */
function forTarget(request: LlmRequest, target: LlmOrigin): LlmRequest {
  // Only a turn with reasoning knows its origin; the codec keeps those as objects, so the texts need no decoding to tell.
  const kept = request.encoded?.codec === PROTOCOL_MESSAGE_CODEC ? request.encoded.items.filter((item): item is LlmMessage => typeof item !== 'string') : request.messages;
  const foreign = kept.some((message) => message.role === 'assistant' && message.reasoning?.origin !== undefined && !sameOrigin(message.reasoning.origin, target));
  if (!foreign) return request;
  const { encoded: _kept, messages, ...rest } = request;
  return { ...rest, messages: historyForTarget(messages, { target, assumedOrigin: target }) };
}

function hostOf(url: string | null | undefined): string | undefined {
  if (!url) return undefined;
  try {
    return new URL(url).hostname.toLowerCase();
  } catch {
    return undefined;
  }
}
