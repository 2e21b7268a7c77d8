/**
 * A request of Anthropic's Messages API (`POST /v1/messages`) from an LlmRequest: the system
 * prompt as `system`, tool calls as `tool_use` blocks and their results as `tool_result` blocks
 * (the results of one turn in one user message, before any text), signed thinking blocks of
 * earlier answers sent back as they came, and prompt-cache breakpoints on the stable prefix:
 * the system prompt, the tools, the condensed summary, and the newest message.
 */
import { isCondensedSummary } from '../../core/agent/conversation-history.js';
import type { LlmMessage, LlmReasoning, LlmRequest, LlmSettings } from '../../core/agent/llm.js';
import { effortOf, sendsReasoningBack } from './protocol-attempts.js';

export const ANTHROPIC_BASE_URL = 'https://api.anthropic.com';
export const ANTHROPIC_VERSION = '2023-06-01';
/** `max_tokens` is required: what is asked for when `max_output_tokens` is not set. */
const DEFAULT_MAX_TOKENS = 16_384;
/** Thinking budgets by effort (the API takes 1,024 at least, and less than max_tokens). */
const THINKING_BUDGET = { low: 2_048, medium: 8_192, high: 24_576 } as const;
const MIN_THINKING_BUDGET = 1_024;

type Block = Record<string, unknown>;
interface WireMessage {
  role: 'user' | 'assistant';
  content: Block[];
}

export interface AnthropicCall {
  url: string;
  headers: Record<string, string>;
  body: Record<string, unknown>;
  stream: boolean;
}

export function buildAnthropicRequest(request: LlmRequest, options: { stream: boolean }): AnthropicCall {
  const { settings } = request;
  const stream = (settings.stream ?? true) && options.stream;
  const cache = settings.prompt_cache !== false;
  const body: Record<string, unknown> = { ...(settings.extra_body ?? {}) };
  body.model = settings.model;
  const maxTokens = settings.max_output_tokens ?? DEFAULT_MAX_TOKENS;
  body.max_tokens = maxTokens;
  const system = request.messages.filter((message) => message.role === 'system').map((message) => message.content as string).join('\n\n');
  const messages = toWireMessages(request.messages, settings);
  let marks = 0;
  if (system !== '') {
    body.system = [{ type: 'text', text: system, ...(cache ? { cache_control: EPHEMERAL } : {}) }];
    if (cache) marks++;
  }
  if (request.tools.length > 0) {
    const tools: Block[] = request.tools.map((tool) => ({ name: tool.name, description: tool.description, input_schema: tool.parameters }));
    if (cache) {
      tools[tools.length - 1] = { ...tools.at(-1), cache_control: EPHEMERAL };
      marks++;
    }
    body.tools = tools;
    if (request.toolChoice === 'none') body.tool_choice = { type: 'none' };
  }
  if (cache) markMessages(messages, 4 - marks);
  body.messages = messages;
  const budget = thinkingBudget(settings, maxTokens);
  if (budget !== null) body.thinking = { type: 'enabled', budget_tokens: budget };
  else {
    if (settings.temperature != null) body.temperature = settings.temperature;
    if (settings.top_p != null) body.top_p = settings.top_p;
  }
  if (request.responseFormat) {
    // No JSON mode: the schema is asked for in words (a structured answer goes through a tool).
    body.system = [...((body.system as Block[] | undefined) ?? []), { type: 'text', text: `Answer with JSON only, matching this schema: ${JSON.stringify(request.responseFormat.schema)}` }];
  }
  body.stream = stream;
  for (const name of settings.drop_params ?? []) delete body[name];
  return { url: messagesUrl(settings), headers: headersOf(settings), body, stream };
}

const EPHEMERAL = { type: 'ephemeral' };

function thinkingBudget(settings: LlmSettings, maxTokens: number): number | null {
  const effort = effortOf(settings);
  if (effort === undefined || effort === 'none') return null;
  const budget = Math.min(THINKING_BUDGET[effort], maxTokens - 1);
  return budget >= MIN_THINKING_BUDGET ? budget : null;
}

function messagesUrl(settings: LlmSettings): string {
  const base = (settings.base_url || ANTHROPIC_BASE_URL).replace(/\/+$/, '');
  return /\/v1$/.test(base) ? `${base}/messages` : `${base}/v1/messages`;
}

function headersOf(settings: LlmSettings): Record<string, string> {
  const headers: Record<string, string> = { 'anthropic-version': ANTHROPIC_VERSION, ...(settings.extra_headers ?? {}) };
  if (settings.api_key) headers['x-api-key'] = settings.api_key;
  return headers;
}

/** The conversation as alternating user and assistant messages (the system prompt goes apart). */
function toWireMessages(messages: readonly LlmMessage[], settings: LlmSettings): WireMessage[] {
  const out: WireMessage[] = [];
  const push = (role: WireMessage['role'], blocks: Block[]): void => {
    if (blocks.length === 0) return;
    const last = out.at(-1);
    // Two turns of one role become one message; thinking may only open an assistant message.
    if (last?.role === role) last.content.push(...blocks.filter((block) => block.type !== 'thinking' && block.type !== 'redacted_thinking'));
    else out.push({ role, content: blocks });
  };
  for (const message of messages) {
    if (message.role === 'system') continue;
    if (message.role === 'tool') push('user', [{ type: 'tool_result', tool_use_id: toolId(message.tool_call_id), content: message.content === '' ? '(no output)' : message.content }]);
    else if (message.role === 'user') push('user', userBlocks(message.content));
    else push('assistant', assistantBlocks(message, settings));
  }
  // Tool results lead their user message (the API requires them before any text).
  for (const message of out) if (message.role === 'user') message.content.sort((a, b) => Number(b.type === 'tool_result') - Number(a.type === 'tool_result'));
  return out;
}

function userBlocks(content: Extract<LlmMessage, { role: 'user' }>['content']): Block[] {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }];
  return content.map((part) => {
    if (part.type === 'text') return { type: 'text', text: part.text };
    if (part.data) return { type: 'image', source: { type: 'base64', media_type: part.mediaType, data: part.data } };
    return { type: 'text', text: `[image ${part.path ?? ''}: not available]` };
  });
}

function assistantBlocks(message: Extract<LlmMessage, { role: 'assistant' }>, settings: LlmSettings): Block[] {
  const blocks: Block[] = [...thinkingBlocks(message.reasoning, settings)];
  if (message.content) blocks.push({ type: 'text', text: message.content });
  for (const call of message.tool_calls ?? []) blocks.push({ type: 'tool_use', id: toolId(call.id), name: call.name, input: inputOf(call.arguments) });
  // Thinking alone is not an answer the API takes back.
  return blocks.some((block) => block.type === 'text' || block.type === 'tool_use') ? blocks : [];
}

/** Thinking and redacted_thinking blocks of an Anthropic answer, exactly as they came (their signatures cover them). */
function thinkingBlocks(reasoning: LlmReasoning | undefined, settings: LlmSettings): Block[] {
  if (!reasoning || !sendsReasoningBack(settings) || reasoning.origin?.api !== 'anthropic') return [];
  const blocks = reasoning.providerData;
  return Array.isArray(blocks) ? blocks.filter((block): block is Block => typeof block === 'object' && block !== null && ['thinking', 'redacted_thinking'].includes(String((block as Block).type))) : [];
}

/** Arguments as the object `input` must be; text that is not one goes as `{}` (the loop already told the model). */
function inputOf(text: string): Record<string, unknown> {
  try {
    const value = JSON.parse(text) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** Tool ids as the API takes them (letters, digits, _ and -): a call from another provider keeps a stable id. */
function toolId(id: string): string {
  return id.replace(/[^A-Za-z0-9_-]/g, '_') || 'tool_call';
}

/**
 * Breakpoints on the messages, at most `left`: the condensed summary (the stable start of the
 * history) and the last block of the newest message (the next request's prefix).
 */
function markMessages(messages: WireMessage[], left: number): void {
  const mark = (message: WireMessage | undefined): void => {
    if (!message || left <= 0) return;
    const index = message.content.length - 1;
    const block = message.content[index];
    if (!block || block.type === 'thinking' || block.type === 'redacted_thinking' || block.cache_control) return;
    message.content[index] = { ...block, cache_control: EPHEMERAL };
    left--;
  };
  const summary = messages.find((message) => message.role === 'user' && message.content.some((block) => block.type === 'text' && isCondensedSummary(String(block.text))));
  if (summary && summary !== messages.at(-1)) {
    const at = summary.content.findIndex((block) => block.type === 'text' && isCondensedSummary(String(block.text)));
    if (left > 1) {
      summary.content[at] = { ...summary.content[at], cache_control: EPHEMERAL };
      left--;
    }
  }
  mark(messages.at(-1));
}
