/**
 * A fake of OpenAI's Responses API (`POST /v1/responses`, Azure's `/openai/responses` and
 * `/openai/v1/responses`). Its streams follow the event order of real recorded streams:
 * response.created, then per output item output_item.added, its deltas (reasoning summary,
 * output text, function call arguments) and output_item.done, then response.completed with the
 * usage. Sources: OpenAI's streaming reference (platform.openai.com/docs/api-reference/responses-streaming)
 * and the recorded streams in vercel/ai packages/openai/src/responses/openai-responses-language-model.test.ts.
 *
 * It refuses what the real API refuses: a function_call_output without its function_call, a
 * function_call without its output, a reasoning item without the item it led to, and a
 * reasoning item whose encrypted content is not exactly the one it issued.
 */
import { isDeepStrictEqual } from 'node:util';
import { argumentsText, sign, split, tokensOf, type FakeProtocol } from './fake-protocol.js';

type Item = Record<string, unknown>;

export const FAKE_RESPONSES_API: FakeProtocol = {
  path: /^(?:\/v1|\/openai|\/openai\/v1)?\/responses$/,
  carriesKey: (headers, key) => headers.authorization === `Bearer ${key}` || headers['api-key'] === key,
  errorBody: (message) => ({ error: { message, type: 'invalid_request_error', param: null, code: null } }),

  chatView(body) {
    const input = Array.isArray(body.input) ? (body.input as Item[]) : [];
    const user = input.find((item) => item.role === 'user');
    const text = typeof user?.content === 'string' ? user.content : JSON.stringify(user?.content ?? '');
    return { model: String(body.model ?? ''), messages: [{ role: 'system', content: String(body.instructions ?? '') }, { role: 'user', content: text }] };
  },

  validate(raw, _headers, state) {
    if (typeof raw !== 'object' || raw === null) return ['the body is not a JSON object'];
    const body = raw as Record<string, unknown>;
    const problems: string[] = [];
    if (typeof body.model !== 'string' || body.model === '') problems.push("Missing required parameter: 'model'.");
    if (!Array.isArray(body.input)) return [...problems, "Missing required parameter: 'input'."];
    if (body.store !== false) problems.push('agentd keeps no state on the server: store must be false');
    if (!Array.isArray(body.include) || !body.include.includes('reasoning.encrypted_content')) problems.push('include must ask for reasoning.encrypted_content (with store: false)');
    for (const [index, tool] of ((body.tools as Item[] | undefined) ?? []).entries()) {
      if (tool.type !== 'function' || typeof tool.name !== 'string' || typeof tool.parameters !== 'object') problems.push(`Invalid value for 'tools[${index}]': a function tool has type, name and parameters.`);
    }
    const input = body.input as Item[];
    const calls = new Set<string>();
    const answered = new Set<string>();
    for (const [index, item] of input.entries()) {
      if (item.type === 'function_call') {
        if (typeof item.call_id !== 'string' || typeof item.name !== 'string' || typeof item.arguments !== 'string') problems.push(`Invalid 'input[${index}]': a function_call has call_id, name and arguments (text).`);
        calls.add(String(item.call_id));
      } else if (item.type === 'function_call_output') {
        if (!calls.has(String(item.call_id))) problems.push(`No tool call found for function call output with call_id ${String(item.call_id)}.`);
        if (typeof item.output !== 'string') problems.push(`Invalid 'input[${index}].output': expected a string.`);
        answered.add(String(item.call_id));
      } else if (item.type === 'reasoning') {
        const issued = state.issued.get(String(item.id));
        if (issued === undefined || !isDeepStrictEqual(issued, item)) problems.push(`The encrypted content for item ${String(item.id)} could not be verified.`);
        const next = input[index + 1];
        if (!next || !(next.type === 'function_call' || next.type === 'reasoning' || (next.role === 'assistant' && next.type !== 'function_call_output'))) {
          problems.push(`Item '${String(item.id)}' of type 'reasoning' was provided without its required following item.`);
        }
      } else if (item.type === undefined || item.type === 'message') {
        if (!['user', 'assistant', 'system', 'developer'].includes(String(item.role))) problems.push(`Invalid value for 'input[${index}].role': ${String(item.role)}.`);
        if (typeof item.content !== 'string' && !Array.isArray(item.content)) problems.push(`Invalid 'input[${index}].content': expected a string or a list of parts.`);
      } else problems.push(`Invalid value for 'input[${index}].type': ${String(item.type)}.`);
    }
    for (const id of calls) if (!answered.has(id)) problems.push(`No tool output found for function call ${id}.`);
    return problems;
  },

  answer({ turn, body, state, index, chunkSize }) {
    const responseId = `resp_fake_${index}`;
    const output: Item[] = [];
    const events: Array<{ event: string; data: Record<string, unknown> }> = [];
    let sequence = 0;
    const emit = (type: string, data: Record<string, unknown>) => events.push({ event: type, data: { type, sequence_number: sequence++, ...data } });
    const shell = (status: string) => ({ id: responseId, object: 'response', created_at: Math.floor(Date.now() / 1000), status, model: body.model, output: [] as Item[], usage: null });
    emit('response.created', { response: shell('in_progress') });
    emit('response.in_progress', { response: shell('in_progress') });
    if (turn.failMidStream && body.stream === true) {
      emit('response.failed', { response: { ...shell('failed'), error: { code: 'server_error', message: 'The model failed to generate a response.' } } });
      return { events };
    }
    if (turn.reasoning) {
      const id = `rs_fake_${index}_${++state.callCounter}`;
      const item: Item = { id, type: 'reasoning', summary: [{ type: 'summary_text', text: turn.reasoning }], encrypted_content: sign('rs', `${id}:${turn.reasoning}`) };
      state.issued.set(id, structuredClone(item));
      const at = output.length;
      emit('response.output_item.added', { output_index: at, item: { id, type: 'reasoning', summary: [] } });
      emit('response.reasoning_summary_part.added', { item_id: id, output_index: at, summary_index: 0, part: { type: 'summary_text', text: '' } });
      for (const piece of split(turn.reasoning, chunkSize)) emit('response.reasoning_summary_text.delta', { item_id: id, output_index: at, summary_index: 0, delta: piece });
      emit('response.reasoning_summary_text.done', { item_id: id, output_index: at, summary_index: 0, text: turn.reasoning });
      emit('response.reasoning_summary_part.done', { item_id: id, output_index: at, summary_index: 0, part: { type: 'summary_text', text: turn.reasoning } });
      emit('response.output_item.done', { output_index: at, item });
      output.push(item);
    }
    const text = turn.text ?? turn.refusal;
    if (text) {
      const id = `msg_fake_${index}`;
      const part = turn.refusal ? { type: 'refusal', refusal: turn.refusal } : { type: 'output_text', text, annotations: [] };
      const at = output.length;
      emit('response.output_item.added', { output_index: at, item: { id, type: 'message', status: 'in_progress', role: 'assistant', content: [] } });
      emit('response.content_part.added', { item_id: id, output_index: at, content_index: 0, part: turn.refusal ? { type: 'refusal', refusal: '' } : { type: 'output_text', text: '', annotations: [] } });
      for (const piece of split(text, chunkSize)) emit(turn.refusal ? 'response.refusal.delta' : 'response.output_text.delta', { item_id: id, output_index: at, content_index: 0, delta: piece });
      emit(turn.refusal ? 'response.refusal.done' : 'response.output_text.done', { item_id: id, output_index: at, content_index: 0, ...(turn.refusal ? { refusal: text } : { text }) });
      emit('response.content_part.done', { item_id: id, output_index: at, content_index: 0, part });
      const item = { id, type: 'message', status: 'completed', role: 'assistant', content: [part] };
      emit('response.output_item.done', { output_index: at, item });
      output.push(item);
    }
    for (const call of turn.toolCalls ?? []) {
      const callId = call.id ?? `call_fake_${++state.callCounter}`;
      const id = `fc_fake_${index}_${output.length}`;
      const args = argumentsText(call.arguments);
      const at = output.length;
      emit('response.output_item.added', { output_index: at, item: { id, type: 'function_call', status: 'in_progress', arguments: '', call_id: callId, name: call.name } });
      for (const piece of split(args, chunkSize + 1)) emit('response.function_call_arguments.delta', { item_id: id, output_index: at, delta: piece });
      emit('response.function_call_arguments.done', { item_id: id, output_index: at, arguments: args });
      const item = { id, type: 'function_call', status: 'completed', arguments: args, call_id: callId, name: call.name };
      emit('response.output_item.done', { output_index: at, item });
      output.push(item);
    }
    const reasoningTokens = turn.reasoning ? tokensOf(turn.reasoning) : 0;
    const outputTokens = turn.usage?.completion_tokens ?? tokensOf(output) + reasoningTokens;
    const inputTokens = turn.usage?.prompt_tokens ?? tokensOf([body.instructions, body.input, body.tools]);
    const usage = { input_tokens: inputTokens, input_tokens_details: { cached_tokens: 0 }, output_tokens: outputTokens, output_tokens_details: { reasoning_tokens: reasoningTokens }, total_tokens: inputTokens + outputTokens };
    const cut = turn.finishReason === 'length';
    const final = { ...shell(cut ? 'incomplete' : 'completed'), output, ...(turn.usage === null ? {} : { usage }), ...(cut ? { incomplete_details: { reason: 'max_output_tokens' } } : {}) };
    if (!turn.omitFinishReason) emit(cut ? 'response.incomplete' : 'response.completed', { response: final });
    return body.stream === true ? { events } : { json: final };
  },
};
