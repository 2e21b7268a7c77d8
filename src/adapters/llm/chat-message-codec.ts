/**
 * The history's messages as the Chat Completions wire form, as text (the openai client's
 * LlmMessageCodec): the text is exactly what a request body carries for the message, so a
 * request joins the texts as they are (chat-request-body.ts). A message whose wire form would
 * not give it back exactly is kept as an object (images by path, an assistant message without
 * text or calls, provider fields named like the call's own, reasoning).
 */
import type { LlmMessage, LlmMessageCodec, LlmToolCall } from '../../core/agent/llm.js';
import { toWireMessage } from './chat-request-shape.js';

const CALL_FIELDS = ['id', 'type', 'function'];

export const WIRE_MESSAGE_CODEC: LlmMessageCodec = {
  encode(message) {
    if (message.role === 'user' && Array.isArray(message.content)) return null;
    if (message.role === 'assistant') {
      // Its reasoning goes back or not depending on the request's endpoint: kept as an object.
      if (message.reasoning) return null;
      const calls = message.tool_calls;
      if (calls === undefined ? message.content === null : calls.length === 0) return null;
      if (calls?.some((call) => call.extra !== undefined && (Object.keys(call.extra).length === 0 || CALL_FIELDS.some((field) => field in call.extra!)))) return null;
    }
    return compact(JSON.stringify(toWireMessage(message)));
  },
  decode(text) {
    const wire = JSON.parse(text) as LlmMessage & { tool_calls?: unknown };
    if (wire.role !== 'assistant' || !Array.isArray(wire.tool_calls)) return wire;
    const toolCalls = (wire.tool_calls as unknown as WireCall[]).map(({ id, type: _type, function: fn, ...extra }): LlmToolCall => ({ id, name: fn.name, arguments: fn.arguments, ...(Object.keys(extra).length > 0 ? { extra } : {}) }));
    return { role: 'assistant', content: wire.content, tool_calls: toolCalls };
  },
};

/**
 * The same text in a string of its own size: V8 leaves a string made by JSON.stringify with
 * about a hundred bytes of its builder's spare room, a third of a short message kept for the
 * conversation's life. The UTF-8 round trip is exact (JSON.stringify escapes lone surrogates).
 */
function compact(text: string): string {
  return Buffer.from(text, 'utf8').toString('utf8');
}

interface WireCall {
  id: string;
  type: string;
  function: { name: string; arguments: string };
  [field: string]: unknown;
}
