import type { LlmConfigInput } from '../schemas/llm-config.js';

/**
 * The LLM as the agent loop sees it: vendor-free. The OpenAI-compatible adapter lives in
 * adapters/openai-llm.ts; tests drive it against a scripted fake server.
 */
export type LlmMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string | LlmUserPart[] }
  | { role: 'assistant'; content: string | null; tool_calls?: LlmToolCall[]; reasoning?: LlmReasoning }
  | { role: 'tool'; tool_call_id: string; content: string };

/**
 * A part of a user message with images. A workdir image is `path` until the request is sent
 * (the run reads it then); `data` is its base64 bytes.
 */
export type LlmUserPart = { type: 'text'; text: string } | { type: 'image'; mediaType: string; path?: string; data?: string };

/** The wire protocol a request is made with (`llm.api`). */
export type LlmApi = 'chat' | 'responses' | 'anthropic';

/**
 * What a model reasoned before it answered, as one provider gave it. The history keeps it on the
 * assistant message; each protocol's client decides what to send back (DeepSeek's
 * `reasoning_content` within a tool loop, Anthropic's signed thinking blocks, Responses'
 * encrypted items) and drops what another provider would reject.
 */
export interface LlmReasoning {
  /** The readable text; empty when the provider gave only an encrypted or redacted form. */
  text: string;
  /** Who produced it: a request to another protocol or model converts or drops `providerData`. */
  origin?: { api: LlmApi; model: string; baseUrl?: string };
  /** Opaque provider payloads kept verbatim (signatures, encrypted items, `reasoning_details`). */
  providerData?: unknown;
}

export interface LlmToolCall {
  id: string;
  name: string;
  /** Raw JSON text as the model produced it (may be invalid: the loop reports that back). */
  arguments: string;
  /** Fields the provider attached to the call besides id/type/function (Gemini's `extra_content`): sent back as they came. */
  extra?: Record<string, unknown>;
}

export interface LlmToolSchema {
  name: string;
  description: string;
  /** JSON Schema of the parameters. */
  parameters: Record<string, unknown>;
}

/** Prompt tokens served from the provider's cache and completion tokens spent reasoning are parts of the first two counts. */
import type { LlmUsage } from '../schemas/usage.js';
export type { LlmUsage };

export interface LlmResponse {
  content: string | null;
  toolCalls: LlmToolCall[];
  usage: LlmUsage;
  /** `stop`, `tool_calls`, `length` (cut at the output limit)… as the provider said it. */
  finishReason: string | null;
  /** The model declined (OpenAI's `refusal`): its words, recorded as its answer. */
  refusal?: string | null;
  /** What the model reasoned, when the provider sent any. */
  reasoning?: LlmReasoning | null;
  /** The model that answered, when it is not the settings' own (a fallback answered). */
  model?: string;
  /** Content parts the client could not read as text or reasoning (kept as they came, never stringified). */
  otherParts?: unknown[];
}

/** The LLM settings a request is made with: a conversation's config, or one a client sent (llm-config.ts). */
export type LlmSettings = LlmConfigInput;

/**
 * How a client writes one message as text (its own wire form) and reads it back. The history
 * keeps each message in this form only, and a request hands the texts to the client as they are:
 * a message is encoded once, when it enters the history, not at every request that carries it.
 */
export interface LlmMessageCodec {
  /** The message as text; null for one kept as an object (one the text could not give back exactly, e.g. images by path). */
  encode(message: LlmMessage): string | null;
  /** The message a text of `encode` came from (equal to it). */
  decode(text: string): LlmMessage;
}

/** The history's messages as kept: each one a text of `codec`, or the message itself. */
export interface EncodedMessages {
  codec: LlmMessageCodec;
  items: readonly (string | LlmMessage)[];
}

export interface LlmRequest {
  settings: LlmSettings;
  /** The messages (for a request built from `encoded`, decoded when read). */
  messages: LlmMessage[];
  /** The same messages as the history keeps them: a client whose codec made them sends the texts as they are. */
  encoded?: EncodedMessages;
  tools: LlmToolSchema[];
  /** The answer must be JSON matching this schema (the provider's `response_format: json_schema`). */
  responseFormat?: { name: string; schema: Record<string, unknown> };
  /** `none`: the tools stay in the request (the cached prefix is unchanged) but the model must answer in text. */
  toolChoice?: 'none';
  signal: AbortSignal;
  /** Called with each piece of assistant text as it streams in. */
  onTextDelta?: (delta: string) => void;
  /** Called with each piece of reasoning text as it streams in. */
  onReasoningDelta?: (delta: string) => void;
  /** Called when an attempt failed and another one follows (the last failure is the LlmError thrown). */
  onRetry?: (retry: LlmRetry) => void;
  /** Called when the request moves to the next model of `settings.fallbacks`. */
  onFallback?: (fallback: LlmFallback) => void;
  /**
   * The run's routing state, kept between its requests: which fallback a `turn` or `sticky`
   * scope stays on. `turn` is the history's last user message (seq): a new one ends a `turn` stay.
   */
  routing?: LlmRouting;
}

/**
 * The request with some fields changed, the others as they are: a `messages` getter (the history
 * decoded when read, llm-request.ts) is carried over as a getter, not read. A spread (`{ ...request }`)
 * would read it, and decode the whole history at every request.
 */
export function withRequestChanges(request: LlmRequest, changes: Partial<LlmRequest>): LlmRequest {
  const descriptors = Object.getOwnPropertyDescriptors(request);
  for (const name of Object.keys(changes)) delete (descriptors as Record<string, PropertyDescriptor>)[name];
  const out = Object.defineProperties({}, descriptors) as LlmRequest;
  for (const [name, value] of Object.entries(changes)) if (value !== undefined) Object.defineProperty(out, name, { value, enumerable: true, writable: true, configurable: true });
  return out;
}

/** A request's move to another model. */
export interface LlmFallback {
  fromModel: string;
  toModel: string;
  /** The failure class (one of `llm.fallback_on`). */
  reason: string;
  /** Attempts made so far across the models, 1-based. */
  attempt: number;
}

/** Owned by a run, written by the fallback router. */
export interface LlmRouting {
  turn: number;
  /** The fallback the run stays on (index in `[primary, ...fallbacks]`), and the turn it was chosen in. */
  stay?: { index: number; turn: number };
}

/** One failed attempt that is retried: no API key, no request body. */
export interface LlmRetry {
  /** 1 for the first attempt. */
  attempt: number;
  /** The model retried (set by the fallback router). */
  model?: string;
  /** The failure class, in `fallback_on`'s words when it is one of them (set by the fallback router). */
  reason?: string;
  code: LlmError['code'];
  status?: number;
  message: string;
  /** Wait before the next attempt. */
  delayMs: number;
}

export interface LlmClient {
  complete(request: LlmRequest): Promise<LlmResponse>;
  /** How this client writes messages: histories keep their messages in this form (see LlmMessageCodec). */
  readonly codec?: LlmMessageCodec;
  /** Whether the endpoint takes `responseFormat` for these settings (else structured output goes through a tool). */
  supportsJsonSchema?(settings: LlmSettings): boolean;
}

/** Thrown by an LlmClient after retries ran out; `code` is a stable machine code. */
export class LlmError extends Error {
  constructor(
    readonly code:
      | 'llm_rate_limited'
      | 'llm_quota_exceeded'
      | 'llm_context_exceeded'
      | 'llm_server_error'
      | 'llm_timeout'
      | 'llm_connection_error'
      | 'llm_bad_request'
      | 'llm_auth_error'
      | 'llm_content_filtered'
      | 'llm_output_truncated'
      | 'llm_empty_response'
      | 'llm_output_invalid'
      | 'llm_unavailable'
      | 'llm_error',
    message: string,
    readonly status?: number,
    readonly more: LlmErrorDetails = {},
  ) {
    super(message);
    this.name = 'LlmError';
  }
}

export interface LlmErrorDetails {
  /** The answer had started streaming when the request failed: it cannot move to another model, only be asked again. */
  outputStarted?: boolean;
  /** Shown in the `agent_error` event's `details` (e.g. `attempts` of llm_unavailable). */
  details?: Record<string, unknown>;
}

/** The codec of a client without its own: a message as its JSON. */
export const JSON_MESSAGE_CODEC: LlmMessageCodec = {
  encode: (message) => JSON.stringify(message),
  decode: (text) => JSON.parse(text) as LlmMessage,
};
