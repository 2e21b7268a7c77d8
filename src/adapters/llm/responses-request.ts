/**
 * A request of OpenAI's Responses API (`POST /responses`) from an LlmRequest. Nothing is kept on
 * the server (`store: false`): the whole conversation goes as input items at every request, and
 * the reasoning items of earlier answers go back as they came (with their encrypted content,
 * asked for by `include`), right before the message or calls they led to.
 */
import type { LlmMessage, LlmReasoning, LlmRequest, LlmSettings } from '../../core/agent/llm.js';
import { effortOf, sendsReasoningBack } from './protocol-attempts.js';
import { DEFAULT_BASE_URL, isReasoningModel } from './chat-request-shape.js';

export interface ResponsesCall {
  url: string;
  headers: Record<string, string>;
  body: Record<string, unknown>;
  stream: boolean;
}

export function buildResponsesRequest(request: LlmRequest, options: { stream: boolean }): ResponsesCall {
  const { settings } = request;
  const stream = (settings.stream ?? true) && options.stream;
  const instructions = request.messages.filter((message) => message.role === 'system').map((message) => message.content as string);
  const body: Record<string, unknown> = { ...(settings.extra_body ?? {}) };
  body.model = settings.model;
  if (instructions.length > 0) body.instructions = instructions.join('\n\n');
  body.input = request.messages.flatMap((message) => inputItems(message, settings));
  if (request.tools.length > 0) {
    body.tools = request.tools.map((tool) => ({ type: 'function', name: tool.name, description: tool.description, parameters: tool.parameters, strict: false }));
    body.parallel_tool_calls = true;
    if (request.toolChoice) body.tool_choice = request.toolChoice;
  }
  if (request.responseFormat) body.text = { format: { type: 'json_schema', name: request.responseFormat.name, schema: request.responseFormat.schema, strict: false } };
  body.store = false;
  body.include = ['reasoning.encrypted_content'];
  body.stream = stream;
  if (settings.max_output_tokens != null) body.max_output_tokens = settings.max_output_tokens;
  const effort = effortOf(settings);
  if (effort !== undefined) body.reasoning = { effort, ...(effort !== 'none' && settings.reasoning?.show !== false ? { summary: 'auto' } : {}) };
  // Reasoning models refuse sampling settings, as on chat completions.
  if (effort === undefined && !isReasoningModel(settings.model)) {
    if (settings.temperature != null) body.temperature = settings.temperature;
    if (settings.top_p != null) body.top_p = settings.top_p;
  }
  for (const name of settings.drop_params ?? []) delete body[name];
  return { ...endpointOf(settings), body, stream };
}

/** One message as input items: reasoning items first (as they came), then text, then calls. */
function inputItems(message: LlmMessage, settings: LlmSettings): Record<string, unknown>[] {
  switch (message.role) {
    case 'system':
      return [];
    case 'user': {
      if (typeof message.content === 'string') return [{ role: 'user', content: message.content }];
      const content = message.content.map((part) => {
        if (part.type === 'text') return { type: 'input_text', text: part.text };
        if (part.data) return { type: 'input_image', image_url: `data:${part.mediaType};base64,${part.data}` };
        return { type: 'input_text', text: `[image ${part.path ?? ''}: not available]` };
      });
      return [{ role: 'user', content }];
    }
    case 'tool':
      return [{ type: 'function_call_output', call_id: message.tool_call_id, output: message.content }];
    case 'assistant': {
      const items: Record<string, unknown>[] = [];
      const calls = message.tool_calls ?? [];
      const hasFollowing = (message.content !== null && message.content !== '') || calls.length > 0;
      if (hasFollowing) items.push(...reasoningItems(message.reasoning, settings));
      if (message.content !== null && message.content !== '') items.push({ role: 'assistant', content: message.content });
      for (const call of calls) items.push({ type: 'function_call', call_id: call.id, name: call.name, arguments: call.arguments });
      return items;
    }
  }
}

/** The reasoning items an answer of this API and model gave (another model cannot read their encrypted content). */
function reasoningItems(reasoning: LlmReasoning | undefined, settings: LlmSettings): Record<string, unknown>[] {
  if (!reasoning || !sendsReasoningBack(settings)) return [];
  // Encrypted content opens only for the model (and the organization behind the endpoint) that made it.
  const origin = reasoning.origin;
  if (origin?.api !== 'responses' || origin.model !== settings.model || (origin.baseUrl ?? null) !== (settings.base_url || null)) return [];
  const items = reasoning.providerData;
  return Array.isArray(items) ? items.filter((item): item is Record<string, unknown> => typeof item === 'object' && item !== null && (item as { type?: unknown }).type === 'reasoning') : [];
}

/**
 * Where the request goes and how the key is sent. OpenAI and compatible servers:
 * `<base_url>/responses` with a bearer token. Azure: its v1 API (`…/openai/v1`) the same way
 * with `api-key`; with an `api_version` (the preview API), `…/openai/responses?api-version=…`.
 */
export function endpointOf(settings: LlmSettings): { url: string; headers: Record<string, string> } {
  const base = (settings.base_url || DEFAULT_BASE_URL).replace(/\/+$/, '');
  const parsed = new URL(base);
  const azure = /\.(openai\.azure\.com|cognitiveservices\.azure\.com|services\.ai\.azure\.com)$/i.test(parsed.hostname) || (settings.api_version != null && settings.api_version !== '');
  const headers: Record<string, string> = { ...(settings.extra_headers ?? {}) };
  if (settings.api_key) {
    if (azure) headers['api-key'] = settings.api_key;
    else headers.authorization = `Bearer ${settings.api_key}`;
  }
  const version = settings.api_version;
  if (/\/openai\/v1$/.test(parsed.pathname) || !azure || !version || version === 'v1') return { url: `${base}/responses`, headers };
  const root = /\/openai$/.test(parsed.pathname) ? base : `${parsed.origin}/openai`;
  return { url: `${root}/responses?api-version=${encodeURIComponent(version)}`, headers };
}
