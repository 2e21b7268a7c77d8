/**
 * A plain Chat Completions provider that refuses message fields it does not know, as strict
 * OpenAI-compatible servers do ("Extra inputs are not permitted"): another provider's reasoning
 * (`reasoning_content`, `reasoning`, `reasoning_details`, `thinking`), or fields on a tool call
 * besides id, type and function (Gemini's `extra_content`). Used as the fallback a history from
 * elsewhere is handed to.
 */
import type { ChatRequestBody } from './fake-llm-types.js';

const MESSAGE_FIELDS = new Set(['role', 'content', 'name', 'tool_calls', 'tool_call_id', 'refusal']);
const CALL_FIELDS = new Set(['id', 'type', 'function']);
const CALL_ID = /^[a-zA-Z0-9_-]{1,64}$/;

export function unknownFieldProblems(body: ChatRequestBody): string[] {
  const problems: string[] = [];
  (body.messages ?? []).forEach((message, i) => {
    for (const field of Object.keys(message)) if (!MESSAGE_FIELDS.has(field)) problems.push(`messages[${i}].${field}: Extra inputs are not permitted`);
    (message.tool_calls ?? []).forEach((call, j) => {
      for (const field of Object.keys(call)) if (!CALL_FIELDS.has(field)) problems.push(`messages[${i}].tool_calls[${j}].${field}: Extra inputs are not permitted`);
      if (!CALL_ID.test(call.id)) problems.push(`messages[${i}].tool_calls[${j}].id: must match ${CALL_ID}`);
    });
    if (message.role === 'tool' && typeof message.tool_call_id === 'string' && !CALL_ID.test(message.tool_call_id)) problems.push(`messages[${i}].tool_call_id: must match ${CALL_ID}`);
  });
  return problems;
}
