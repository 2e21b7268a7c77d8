/**
 * The history as another provider may receive it. Each provider's assistant turns may carry
 * parts only that provider accepts: reasoning with signatures or encrypted items
 * (`providerData`), fields on tool calls (Gemini's `extra_content` with its thought signature),
 * tool-call ids in its own format. Sent to another protocol, model or endpoint they are refused
 * (a 400 on every later turn), so for such a request they are dropped or converted; the log,
 * and the history kept in memory, keep the original. Every client calls this for a request
 * whose target differs from where the history came from (the fallback router does for each
 * fallback attempt).
 */
import type { LlmApi, LlmMessage, LlmReasoning, LlmToolCall } from '../../core/agent/llm.js';

/** Where a request goes, or where an assistant turn came from. */
export interface LlmOrigin {
  api: LlmApi;
  model: string;
  baseUrl?: string;
}

/** Tool-call ids every protocol accepts (Anthropic's rule is the strictest of the three). */
const PORTABLE_ID = /^[a-zA-Z0-9_-]{1,64}$/;

/**
 * `messages` for a request to `target`. An assistant turn's origin is its reasoning's, else
 * `assumedOrigin` (the conversation's primary model: turns recorded before origins were kept).
 * Turns from elsewhere lose their reasoning (text included: a thinking block without its
 * signature is refused too) and their tool calls' provider fields; tool-call ids outside the
 * portable form are rewritten, the same way in the call and in its result. The array and the
 * messages given are not changed.
 */
export function historyForTarget(messages: readonly LlmMessage[], options: { target: LlmOrigin; assumedOrigin: LlmOrigin }): LlmMessage[] {
  const ids = new Map<string, string>();
  const portable = (id: string): string => {
    if (PORTABLE_ID.test(id)) return id;
    let mapped = ids.get(id);
    if (!mapped) {
      mapped = `call_${id.replace(/[^a-zA-Z0-9_-]/g, '_').slice(0, 48)}_${ids.size}`;
      ids.set(id, mapped);
    }
    return mapped;
  };
  return messages.map((message): LlmMessage => {
    if (message.role === 'tool') {
      const id = portable(message.tool_call_id);
      return id === message.tool_call_id ? message : { ...message, tool_call_id: id };
    }
    if (message.role !== 'assistant') return message;
    const origin = message.reasoning?.origin ?? options.assumedOrigin;
    const foreign = !sameOrigin(origin, options.target);
    const calls = message.tool_calls?.map((call) => portableCall(call, { foreign, portable }));
    const changed = (foreign && message.reasoning !== undefined) || calls?.some((call, i) => call !== message.tool_calls![i]);
    if (!changed) return message;
    const { reasoning, tool_calls: _calls, ...rest } = message;
    return { ...rest, ...(calls ? { tool_calls: calls } : {}), ...(foreign || !reasoning ? {} : { reasoning: reasoning as LlmReasoning }) };
  });
}

function portableCall(call: LlmToolCall, options: { foreign: boolean; portable: (id: string) => string }): LlmToolCall {
  const id = options.portable(call.id);
  const dropExtra = options.foreign && call.extra !== undefined;
  if (id === call.id && !dropExtra) return call;
  const { extra, ...rest } = call;
  return { ...rest, id, ...(dropExtra || extra === undefined ? {} : { extra }) };
}

export function sameOrigin(a: LlmOrigin, b: LlmOrigin): boolean {
  return a.api === b.api && a.model === b.model && trimmed(a.baseUrl) === trimmed(b.baseUrl);
}

function trimmed(url: string | undefined): string {
  return (url ?? '').replace(/\/+$/, '');
}
