/**
 * The Chat Completions request body as the text that is sent, built from pieces kept between
 * requests. A run sends the whole history at every step; encoding all of it again each time
 * cost more as the history grew (a 67 KiB body by step 200). Here each history message is
 * encoded once, when a request first carries it (by the message object's identity: the history
 * never changes a message it made), each tool schema once, and only the rest of the body (model,
 * settings, provider quirks: chat-request-shape.ts) is encoded anew. The text is byte for byte
 * `JSON.stringify(shapeChatRequest(request, options).body)` (test/llm/chat-request-body.test.ts).
 */
import { randomUUID } from 'node:crypto';
import type { EncodedMessages, LlmMessage, LlmRequest, LlmToolSchema } from '../../core/agent/llm.js';
import { WIRE_MESSAGE_CODEC } from './chat-message-codec.js';
import { cacheMarkIndexes, shapeWith, toWireMessage, toWireTool, withCacheMark, type Endpoint, type ShapeOptions } from './chat-request-shape.js';

export interface EncodedRequest {
  /** The JSON body. */
  text: string;
  headers: Record<string, string>;
  stream: boolean;
  /** Characters of `[messages, tools]` as JSON (what Ollama's prompt truncation check estimates tokens from). */
  promptChars: number;
  /** The `model` field as sent (Azure's deployment), if any. */
  model: unknown;
}

/** Stand-ins for the two encoded lists while the rest of the body is stringified (unguessable: a NUL and a random id). */
const SLOT = `\u0000agentd-encoded-${randomUUID()}`;
const MESSAGES_SLOT = `${SLOT}:messages`;
const TOOLS_SLOT = `${SLOT}:tools`;
const MESSAGES_TOKEN = JSON.stringify(MESSAGES_SLOT);
const TOOLS_TOKEN = JSON.stringify(TOOLS_SLOT);

/** A message's wire JSON without a cache mark, by identity (the history's messages are never changed). */
const messageTexts = new WeakMap<LlmMessage, string>();
/** A tool's wire JSON, plain and in Gemini's dialect (a tool schema is never changed: tool-offer.ts). */
const toolTexts = new WeakMap<LlmToolSchema, { plain?: string; gemini?: string }>();

export function encodeChatRequest(request: LlmRequest, options: ShapeOptions): EncodedRequest {
  let messagesText = '[]';
  let toolsText = '[]';
  const shaped = shapeWith(request, options, {
    messages: (endpoint) => {
      // The history's own texts when it keeps them in the wire form; else the messages, encoded here.
      const encoded = request.encoded?.codec === WIRE_MESSAGE_CODEC ? request.encoded : null;
      messagesText = encoded ? encodeItems(encoded, endpoint) : encodeMessages(request.messages, endpoint);
      return MESSAGES_SLOT;
    },
    tools: (endpoint) => {
      toolsText = encodeTools(request.tools, endpoint.gemini);
      return TOOLS_SLOT;
    },
  });
  let text = JSON.stringify(shaped.body);
  text = fill(text, MESSAGES_TOKEN, messagesText);
  text = fill(text, TOOLS_TOKEN, toolsText);
  return { text, headers: shaped.headers, stream: shaped.stream, promptChars: messagesText.length + toolsText.length + 3, model: shaped.body.model };
}

function encodeMessages(messages: readonly LlmMessage[], endpoint: Endpoint): string {
  const marks = endpoint.promptCache ? cacheMarkIndexes(messages) : [];
  const pieces = messages.map((message, index) => (marks.includes(index) ? JSON.stringify(withCacheMark(toWireMessage(message, endpoint.sendBack))) : messageText(message, endpoint)));
  return `[${pieces.join(',')}]`;
}

/** Texts of the wire codec go as they are; the (at most two) messages marked for the prompt cache are decoded and marked. */
function encodeItems(encoded: EncodedMessages, endpoint: Endpoint): string {
  const { items, codec } = encoded;
  const promptCache = endpoint.promptCache;
  const message = (item: string | LlmMessage) => (typeof item === 'string' ? codec.decode(item) : item);
  let marks: number[] = [];
  if (promptCache && items.length > 0) {
    // The system prompt comes first; the last message is the other candidate.
    const system = items.findIndex((item) => message(item).role === 'system');
    const candidates = [...(system >= 0 ? [system] : []), items.length - 1];
    const view = items.map((_, index) => (candidates.includes(index) ? message(items[index]!) : { role: 'other' }));
    marks = cacheMarkIndexes(view);
  }
  const pieces = items.map((item, index) => {
    if (marks.includes(index)) return JSON.stringify(withCacheMark(toWireMessage(message(item), endpoint.sendBack)));
    return typeof item === 'string' ? item : messageText(item, endpoint);
  });
  return `[${pieces.join(',')}]`;
}

function messageText(message: LlmMessage, endpoint: Endpoint): string {
  // A message with reasoning goes as the endpoint wants it (the codec keeps it as an object for that).
  if (message.role === 'assistant' && message.reasoning) return JSON.stringify(toWireMessage(message, endpoint.sendBack));
  let text = messageTexts.get(message);
  if (text === undefined) {
    text = JSON.stringify(toWireMessage(message));
    messageTexts.set(message, text);
  }
  return text;
}

function encodeTools(tools: readonly LlmToolSchema[], gemini: boolean): string {
  const pieces = tools.map((tool) => {
    let texts = toolTexts.get(tool);
    if (!texts) toolTexts.set(tool, (texts = {}));
    const key = gemini ? 'gemini' : 'plain';
    return (texts[key] ??= JSON.stringify(toWireTool(tool, gemini)));
  });
  return `[${pieces.join(',')}]`;
}

/** The body's text with a slot's token replaced by its encoded list (absent when `drop_params` took the field out). */
function fill(text: string, token: string, value: string): string {
  const at = text.indexOf(token);
  return at < 0 ? text : text.slice(0, at) + value + text.slice(at + token.length);
}
