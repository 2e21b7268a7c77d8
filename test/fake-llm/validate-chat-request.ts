/**
 * Checks a chat completion request the way a strict provider (OpenAI) does, returning one
 * sentence per problem: the fake answers 400 and records them, so a malformed request fails tests.
 */
import type { ChatRequestBody, FakeChatMessage } from './fake-llm-types.js';

export interface ValidateOptions {
  /** The first message must be `system` (default true). */
  requireSystemFirst: boolean;
  /** Azure path form: `api-version` is required in the query. */
  azure: boolean;
  query: Record<string, string>;
}

const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool']);
const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

export function validateChatRequest(body: unknown, options: ValidateOptions): string[] {
  if (!isObject(body)) return ['the body is not a JSON object'];
  const request = body as ChatRequestBody;
  const problems: string[] = [];
  if (options.azure && !options.query['api-version']) problems.push('the Azure path needs an api-version query parameter');
  if (typeof request.model !== 'string' || request.model === '') problems.push('`model` is missing');
  problems.push(...validateTools(request), ...validateParams(request));
  if (!Array.isArray(request.messages) || request.messages.length === 0) {
    problems.push('`messages` must be a non-empty array');
    return problems;
  }
  if (options.requireSystemFirst && request.messages[0]?.role !== 'system') {
    problems.push(`the first message must be role "system", got "${String(request.messages[0]?.role)}"`);
  }
  problems.push(...validateMessages(request.messages));
  return problems;
}

function validateMessages(messages: FakeChatMessage[]): string[] {
  const problems: string[] = [];
  const seenCallIds = new Set<string>();
  let pending: { ids: Set<string>; at: number } | null = null;
  messages.forEach((message, i) => {
    if (!isObject(message) || !ROLES.has(message.role)) {
      problems.push(`messages[${i}] has an invalid role ${JSON.stringify((message as { role?: unknown })?.role)}`);
      return;
    }
    if (message.role !== 'tool' && pending && pending.ids.size > 0) {
      problems.push(
        `messages[${pending.at}] (assistant) has tool_calls [${[...pending.ids].join(', ')}] with no tool message before messages[${i}] (${message.role})`,
      );
      pending = null;
    }
    if (message.role === 'tool') {
      const id = message.tool_call_id;
      if (typeof id !== 'string' || id === '') problems.push(`messages[${i}] (tool) has no tool_call_id`);
      else if (pending?.ids.has(id)) pending.ids.delete(id);
      else if (seenCallIds.has(id)) problems.push(`messages[${i}] (tool) answers "${id}" again or not right after its assistant message`);
      else problems.push(`messages[${i}] (tool) has tool_call_id "${id}" with no matching assistant tool_call`);
      if (!isContent(message.content)) problems.push(`messages[${i}] (tool) content must be a string or text parts`);
      return;
    }
    if (message.role !== 'assistant') {
      if (!isContent(message.content)) problems.push(`messages[${i}] (${message.role}) content must be a string or content parts`);
      else if (Array.isArray(message.content)) problems.push(...validateParts(message.content as Record<string, any>[], i, message.role));
      return;
    }
    const calls = message.tool_calls;
    if (calls === undefined || calls === null) {
      if (!isContent(message.content)) problems.push(`messages[${i}] (assistant) needs content when it has no tool_calls`);
      return;
    }
    if (!Array.isArray(calls) || calls.length === 0) {
      problems.push(`messages[${i}] (assistant) tool_calls must be a non-empty array when present`);
      return;
    }
    if (message.content !== null && message.content !== undefined && !isContent(message.content)) {
      problems.push(`messages[${i}] (assistant) content must be a string or null`);
    }
    const ids = new Set<string>();
    calls.forEach((call, j) => {
      const where = `messages[${i}].tool_calls[${j}]`;
      if (!isObject(call) || typeof call.id !== 'string' || call.id === '') return void problems.push(`${where} has no id`);
      if (ids.has(call.id)) problems.push(`${where} repeats the id "${call.id}" of the same message`);
      ids.add(call.id);
      seenCallIds.add(call.id);
      if (call.type !== 'function') problems.push(`${where} must have type "function"`);
      if (!isObject(call.function) || typeof call.function.name !== 'string' || call.function.name === '') {
        problems.push(`${where} has no function.name`);
      } else if (typeof call.function.arguments !== 'string') {
        problems.push(`${where} function.arguments must be a string`);
      }
    });
    pending = { ids, at: i };
  });
  const open = pending as { ids: Set<string>; at: number } | null;
  if (open && open.ids.size > 0) {
    problems.push(`messages[${open.at}] (assistant) has tool_calls [${[...open.ids].join(', ')}] with no tool message`);
  }
  return problems;
}

function validateTools(request: ChatRequestBody): string[] {
  if (request.tools === undefined) {
    return request.tool_choice !== undefined ? ['`tool_choice` is set without `tools`'] : [];
  }
  if (!Array.isArray(request.tools) || request.tools.length === 0) return ['`tools` must be a non-empty array when present'];
  const problems: string[] = [];
  const names = new Set<string>();
  request.tools.forEach((tool, i) => {
    if (!isObject(tool) || tool.type !== 'function') return void problems.push(`tools[${i}] must have type "function"`);
    const fn = tool.function;
    if (!isObject(fn) || typeof fn.name !== 'string' || !TOOL_NAME.test(fn.name)) {
      return void problems.push(`tools[${i}].function.name must match ${TOOL_NAME}`);
    }
    if (names.has(fn.name)) problems.push(`tools[${i}] repeats the name "${fn.name}"`);
    names.add(fn.name);
    if (!isObject(fn.parameters) || fn.parameters.type !== 'object') {
      problems.push(`tools[${i}] (${fn.name}) parameters must be a JSON Schema object with type "object"`);
    }
    if (fn.description !== undefined && typeof fn.description !== 'string') problems.push(`tools[${i}] description must be a string`);
  });
  return problems;
}

function validateParams(request: ChatRequestBody): string[] {
  const problems: string[] = [];
  if (request.stream_options !== undefined && request.stream !== true) problems.push('`stream_options` is only allowed when `stream` is true');
  if (request.max_tokens !== undefined && request.max_completion_tokens !== undefined) {
    problems.push('`max_tokens` and `max_completion_tokens` are both set');
  }
  const ranges: Array<[string, number, number]> = [['temperature', 0, 2], ['top_p', 0, 1]];
  for (const [field, min, max] of ranges) {
    const value = request[field];
    if (value !== undefined && (typeof value !== 'number' || value < min || value > max)) problems.push(`\`${field}\` must be a number in [${min}, ${max}]`);
  }
  const format = request.response_format as { type?: unknown; json_schema?: { name?: unknown; schema?: unknown; strict?: unknown } } | undefined;
  if (format !== undefined) {
    if (!isObject(format) || !['text', 'json_object', 'json_schema'].includes(String(format.type))) problems.push('`response_format.type` must be text, json_object or json_schema');
    else if (format.type === 'json_schema') {
      const spec = format.json_schema;
      if (!isObject(spec)) problems.push('`response_format.json_schema` is required for type json_schema');
      else {
        if (typeof spec.name !== 'string' || !TOOL_NAME.test(spec.name)) problems.push('`response_format.json_schema.name` must match ^[a-zA-Z0-9_-]{1,64}$');
        if (spec.schema !== undefined && !isObject(spec.schema)) problems.push('`response_format.json_schema.schema` must be an object');
        if (spec.strict !== undefined && typeof spec.strict !== 'boolean') problems.push('`response_format.json_schema.strict` must be a boolean');
      }
    }
  }
  const effort = request.reasoning_effort;
  if (effort !== undefined && !['none', 'minimal', 'low', 'medium', 'high', 'xhigh'].includes(String(effort))) {
    problems.push(`\`reasoning_effort\` ${JSON.stringify(effort)} is not supported`);
  }
  return problems;
}

function isContent(content: unknown): boolean {
  return typeof content === 'string' || (Array.isArray(content) && content.every((part) => isObject(part) && typeof part.type === 'string'));
}

function isObject(value: unknown): value is Record<string, any> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Content parts as OpenAI takes them: text parts with text, images only in user messages, as image_url with an http(s) or base64 data URL. */
function validateParts(parts: Record<string, any>[], index: number, role: string): string[] {
  const problems: string[] = [];
  parts.forEach((part, j) => {
    const where = `messages[${index}].content[${j}]`;
    if (part.type === 'text') {
      if (typeof part.text !== 'string') problems.push(`${where} (text) has no text`);
    } else if (part.type === 'image_url') {
      if (role !== 'user') problems.push(`${where}: image parts are only allowed in user messages`);
      const url = part.image_url?.url;
      if (typeof url !== 'string' || !/^(https?:\/\/|data:image\/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/]+=*$)/.test(url)) problems.push(`${where} (image_url) needs an http(s) URL or a base64 data URL of a PNG, JPEG, GIF or WebP image`);
    } else {
      problems.push(`${where} has an unsupported type ${JSON.stringify(part.type)}`);
    }
  });
  return problems;
}
