/**
 * The Chat Completions request body for one LLM request, shaped for the endpoint it goes to.
 * Providers differ in what they accept; each rule here is a documented quirk:
 * - reasoning models (o-series, gpt-5) reject `temperature`/`top_p` and want `max_completion_tokens`;
 * - Azure before api-version 2024-10-21 rejects `stream_options` and `max_completion_tokens`;
 * - Gemini rejects JSON Schema keywords outside its OpenAPI subset (`exclusiveMinimum`, `$schema`…)
 *   and needs each tool call's `extra_content` (its thought signature) sent back;
 * - Claude behind OpenRouter or LiteLLM caches a prompt prefix only where `cache_control` marks it;
 * - DeepSeek's thinking mode refuses a tool loop whose assistant messages lack their
 *   `reasoning_content`; OpenRouter wants `reasoning_details` back verbatim (signatures); other
 *   providers get no reasoning back (some reject unknown message fields): `llm.reasoning.send_back`.
 * Per-conversation settings (`max_tokens_param`, `stream_usage`, `drop_params`, `extra_body`,
 * `extra_headers`, `prompt_cache`) override what is detected.
 */
import type { LlmMessage, LlmRequest, LlmSettings, LlmToolSchema } from '../../core/agent/llm.js';
import { reasoningDetailsOf, sameOrigin } from './chat-reasoning.js';

export interface ShapedRequest {
  body: Record<string, unknown>;
  headers: Record<string, string>;
  stream: boolean;
}

export const DEFAULT_BASE_URL = 'https://api.openai.com/v1';

/** Azure api-versions from this date on take `stream_options` and `max_completion_tokens`. */
const AZURE_MODERN_API_VERSION = '2024-10-21';

export interface ShapeOptions {
  stream: boolean;
  maxTokensParam?: LlmSettings['max_tokens_param'];
}

export function shapeChatRequest(request: LlmRequest, options: ShapeOptions): ShapedRequest {
  return shapeWith(request, options, {
    messages: (endpoint) => withCacheMarks(request.messages.map((message) => toWireMessage(message, endpoint.sendBack)), endpoint.promptCache),
    tools: (endpoint) => request.tools.map((tool) => toWireTool(tool, endpoint.gemini)),
  });
}

/** What goes in the body's `messages` and `tools` (see chat-request-body.ts, which fills them with encoded text). */
export interface BodySlots {
  messages(endpoint: Endpoint): unknown;
  tools(endpoint: Endpoint): unknown;
}

/** The body with its `messages` and `tools` from `slots`, every other field as the endpoint wants it. */
export function shapeWith(request: LlmRequest, options: ShapeOptions, slots: BodySlots): ShapedRequest & { endpoint: Endpoint } {
  const { settings } = request;
  const endpoint = describeEndpoint(settings);
  const body: Record<string, unknown> = { ...(settings.extra_body ?? {}) };
  body.model = settings.model;
  body.messages = slots.messages(endpoint);
  if (request.tools.length > 0) body.tools = slots.tools(endpoint);
  if (request.toolChoice && body.tools) body.tool_choice = request.toolChoice;
  if (request.responseFormat) {
    const schema = endpoint.gemini ? toGeminiSchema(request.responseFormat.schema) : request.responseFormat.schema;
    // strict: false: any JSON Schema the client gave is accepted (strict mode needs every property required).
    body.response_format = { type: 'json_schema', json_schema: { name: request.responseFormat.name, schema, strict: false } };
  }
  if (!endpoint.reasoningModel) {
    if (settings.temperature != null) body.temperature = settings.temperature;
    if (settings.top_p != null) body.top_p = settings.top_p;
  }
  if (settings.max_output_tokens != null) body[maxTokensField(settings.max_tokens_param ?? options.maxTokensParam ?? 'auto', endpoint)] = settings.max_output_tokens;
  // 'none' is sent as nothing: models without reasoning reject the field altogether.
  const effort = settings.reasoning?.effort ?? settings.reasoning_effort;
  if (effort && effort !== 'none') body.reasoning_effort = effort;
  const stream = settings.stream ?? options.stream;
  body.stream = stream;
  if (stream && (settings.stream_usage ?? !endpoint.azureLegacy)) body.stream_options = { include_usage: true };
  for (const name of settings.drop_params ?? []) delete body[name];
  return { body, headers: { ...(settings.extra_headers ?? {}) }, stream, endpoint };
}

export interface Endpoint {
  reasoningModel: boolean;
  azureLegacy: boolean;
  gemini: boolean;
  promptCache: boolean;
  /** OpenAI's own API or Azure's: `max_completion_tokens` is understood. */
  openAiProper: boolean;
  /** How reasoning goes back on assistant messages; null: it does not. */
  sendBack: SendBack | null;
}

/**
 * Reasoning sent back on the assistant messages of a request: as `reasoning_content` text
 * (DeepSeek, and any provider when `send_back` is `always`), or as OpenRouter's
 * `reasoning_details` as received (text as `reasoning` when there are none). `model`: opaque
 * payloads go only to the model that made them.
 */
export interface SendBack {
  field: 'reasoning_content' | 'reasoning_details';
  model: string;
}

function describeEndpoint(settings: LlmSettings): Endpoint {
  const host = safeHost(settings.base_url || DEFAULT_BASE_URL);
  const model = settings.model;
  const apiVersion = settings.api_version ?? '';
  const azureLegacy = /^\d{4}-\d{2}-\d{2}/.test(apiVersion) && apiVersion.slice(0, 10) < AZURE_MODERN_API_VERSION;
  const openRouter = host === 'openrouter.ai';
  const viaGateway = openRouter || /litellm/i.test(host) || /litellm/i.test(settings.base_url ?? '');
  return {
    sendBack: sendBackOf(settings, { openRouter, deepseek: host === 'api.deepseek.com' || (!viaGateway && /deepseek/i.test(model)) }),
    reasoningModel: isReasoningModel(model),
    azureLegacy,
    gemini: /(^|\.)googleapis\.com$/.test(host) || /(^|\/)gemini/i.test(model),
    promptCache: settings.prompt_cache ?? (/claude|anthropic/i.test(model) && viaGateway),
    openAiProper: !settings.base_url || host.endsWith('openai.com') || host.endsWith('.azure.com') || (Boolean(settings.api_version) && !azureLegacy),
  };
}

/** `llm.reasoning.send_back`: `auto` as the provider requires, `always` on every endpoint, `never`. */
function sendBackOf(settings: LlmSettings, provider: { openRouter: boolean; deepseek: boolean }): SendBack | null {
  const mode = settings.reasoning?.send_back ?? 'auto';
  if (mode === 'never') return null;
  if (provider.openRouter) return { field: 'reasoning_details', model: settings.model };
  if (provider.deepseek || mode === 'always') return { field: 'reasoning_content', model: settings.model };
  return null;
}

/**
 * Whether `response_format: json_schema` is taken: an explicit `structured_output` decides;
 * `auto` trusts OpenAI's and Azure's endpoints with the models that have it (gpt-4o and later,
 * the o-series, gpt-5), and nothing else (other servers vary: the `final_output` tool works everywhere).
 */
export function supportsJsonSchema(settings: LlmSettings): boolean {
  if (settings.structured_output === 'json_schema') return true;
  if (settings.structured_output === 'tool') return false;
  const name = settings.model.split('/').pop() ?? settings.model;
  return describeEndpoint(settings).openAiProper && (/^gpt-(4o|4\.1|5)/i.test(name) || isReasoningModel(name));
}

/** o1, o3-mini, o4-mini, gpt-5, gpt-5-mini, openai/gpt-5…: not gpt-5-chat, which is a chat model. */
export function isReasoningModel(model: string): boolean {
  const name = model.split('/').pop() ?? model;
  return /^o[1-9](?:$|[-.])/i.test(name) || (/^gpt-5(?:$|[-.])/i.test(name) && !/chat/i.test(name));
}

function maxTokensField(choice: NonNullable<LlmSettings['max_tokens_param']>, endpoint: Endpoint): 'max_tokens' | 'max_completion_tokens' {
  if (choice !== 'auto') return choice;
  if (endpoint.azureLegacy) return 'max_tokens';
  return endpoint.reasoningModel || endpoint.openAiProper ? 'max_completion_tokens' : 'max_tokens';
}

/** A tool as the body's `tools` lists it (Gemini: its schema in Gemini's dialect). */
export function toWireTool(tool: LlmToolSchema, gemini: boolean): Record<string, unknown> {
  return { type: 'function', function: { name: tool.name, description: tool.description, parameters: gemini ? toGeminiSchema(tool.parameters) : tool.parameters } };
}

/**
 * An assistant message's tool calls carry back whatever the provider attached to them
 * (`extra_content`), and its reasoning as `sendBack` says.
 */
export function toWireMessage(message: LlmMessage, sendBack: SendBack | null = null): Record<string, unknown> {
  if (message.role === 'user' && Array.isArray(message.content)) {
    // Images go as OpenAI's image_url parts with a data URL (what every compatible server takes).
    const content = message.content.map((part) => {
      if (part.type === 'text') return { type: 'text', text: part.text };
      if (part.data) return { type: 'image_url', image_url: { url: `data:${part.mediaType};base64,${part.data}` } };
      return { type: 'text', text: `[image ${part.path ?? ''}: not available]` };
    });
    return { role: 'user', content };
  }
  if (message.role !== 'assistant') return { ...message };
  const toolCalls = message.tool_calls ?? [];
  const reasoning = sendBack && message.reasoning ? wireReasoning(message.reasoning, sendBack) : {};
  if (toolCalls.length === 0) return { role: 'assistant', content: message.content ?? '', ...reasoning };
  return {
    role: 'assistant',
    content: message.content,
    ...reasoning,
    tool_calls: toolCalls.map((call) => ({ ...(call.extra ?? {}), id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } })),
  };
}

/** The fields an assistant message carries its reasoning in (none when there is nothing to send). */
function wireReasoning(reasoning: NonNullable<Extract<LlmMessage, { role: 'assistant' }>['reasoning']>, sendBack: SendBack): Record<string, unknown> {
  if (sendBack.field === 'reasoning_details') {
    const details = sameOrigin(reasoning, sendBack.model) ? reasoningDetailsOf(reasoning) : undefined;
    if (details) return { reasoning_details: details };
    return reasoning.text ? { reasoning: reasoning.text } : {};
  }
  return reasoning.text ? { reasoning_content: reasoning.text } : {};
}

/**
 * Two cache breakpoints, as Anthropic's prompt caching wants them: the end of the system prompt
 * (tools and instructions, stable for the whole conversation) and the end of the newest message
 * (everything before it is the previous request's prompt).
 */
function withCacheMarks(messages: Record<string, unknown>[], on: boolean): Record<string, unknown>[] {
  if (!on || messages.length === 0) return messages;
  const marks = cacheMarkIndexes(messages);
  return marks.length === 0 ? messages : messages.map((message, index) => (marks.includes(index) ? withCacheMark(message) : message));
}

/** Which messages carry a cache breakpoint: the system prompt, and the newest message when it is the user's or a tool result. */
export function cacheMarkIndexes(messages: readonly { role?: unknown; content?: unknown }[]): number[] {
  const marks: number[] = [];
  const markable = (index: number) => typeof messages[index]?.content === 'string' && messages[index]?.content !== '';
  const system = messages.findIndex((message) => message.role === 'system');
  if (system >= 0 && markable(system)) marks.push(system);
  const last = messages.length - 1;
  const role = messages[last]?.role;
  if (last !== system && (role === 'user' || role === 'tool') && markable(last)) marks.push(last);
  return marks;
}

/** A wire message whose text content becomes one part with an `ephemeral` cache breakpoint. */
export function withCacheMark(message: Record<string, unknown>): Record<string, unknown> {
  return { ...message, content: [{ type: 'text', text: message.content, cache_control: { type: 'ephemeral' } }] };
}

/** JSON Schema keywords Gemini's function declarations accept (its OpenAPI 3.0 subset). */
const GEMINI_KEYWORDS = new Set([
  'type', 'format', 'description', 'nullable', 'enum', 'items', 'minItems', 'maxItems', 'properties', 'required',
  'minimum', 'maximum', 'minLength', 'maxLength', 'pattern', 'anyOf', 'title', 'default', 'propertyOrdering',
]);

/**
 * A tool schema Gemini accepts: `exclusiveMinimum`/`exclusiveMaximum` become bounds, `const`
 * an enum, and keywords outside the subset are dropped (the tool validates its arguments anyway).
 */
export function toGeminiSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(toGeminiSchema);
  if (!schema || typeof schema !== 'object') return schema;
  const source = schema as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(source)) {
    if (key === 'properties' && value && typeof value === 'object') {
      out.properties = Object.fromEntries(Object.entries(value).map(([name, property]) => [name, toGeminiSchema(property)]));
    } else if (key === 'exclusiveMinimum' && typeof value === 'number') {
      out.minimum ??= value;
    } else if (key === 'exclusiveMaximum' && typeof value === 'number') {
      out.maximum ??= value;
    } else if (key === 'const') {
      out.enum = [value];
    } else if (key === 'oneOf') {
      out.anyOf = toGeminiSchema(value);
    } else if (GEMINI_KEYWORDS.has(key)) {
      out[key] = key === 'items' || key === 'anyOf' ? toGeminiSchema(value) : value;
    }
  }
  // `type: ["string", "null"]` is a nullable string in Gemini's dialect.
  if (Array.isArray(out.type)) {
    const types = (out.type as unknown[]).filter((type) => type !== 'null');
    if (types.length < (out.type as unknown[]).length) out.nullable = true;
    out.type = types.length === 1 ? types[0] : types;
  }
  return out;
}

function safeHost(url: string): string {
  try {
    return new URL(url).hostname.toLowerCase();
  } catch {
    return '';
  }
}
