/**
 * A fake of Anthropic's Messages API (`POST /v1/messages`). Its streams have the shape of real
 * recorded ones: message_start (input usage with cache counts), per content block
 * content_block_start, its deltas (thinking_delta then one signature_delta; text_delta;
 * input_json_delta starting with an empty piece) and content_block_stop, then message_delta
 * (stop_reason, output usage) and message_stop. Source: the recorded claude-3-7-sonnet streams
 * in deepnoodle-ai/dive providers/anthropic/reference.md, and Anthropic's streaming reference
 * (docs.anthropic.com/en/docs/build-with-claude/streaming).
 *
 * It refuses what the real API refuses: a request without `anthropic-version` or `max_tokens`,
 * roles that do not alternate, a tool_result without its tool_use in the message before, a
 * tool_use without its tool_result in the message after, a thinking block whose signature does
 * not match its text (or a redacted_thinking block it did not issue), a tool loop whose last
 * assistant turn dropped the thinking it started with, empty text blocks, more than four
 * cache_control breakpoints, a thinking budget under 1,024 or not under max_tokens.
 */
import { sign, split, argumentsText, tokensOf, type FakeProtocol } from './fake-protocol.js';

type Block = Record<string, unknown>;
type Message = { role?: unknown; content?: unknown };

export const FAKE_ANTHROPIC_API: FakeProtocol = {
  path: /^\/v1\/messages$/,
  carriesKey: (headers, key) => headers['x-api-key'] === key,
  errorBody: (message) => ({ type: 'error', error: { type: 'invalid_request_error', message } }),

  chatView(body) {
    const messages = Array.isArray(body.messages) ? (body.messages as Message[]) : [];
    const first = blocksOf(messages[0]?.content).find((block) => block.type === 'text');
    return { model: String(body.model ?? ''), messages: [{ role: 'system', content: systemText(body.system) }, { role: 'user', content: String(first?.text ?? '') }] };
  },

  validate(raw, headers, state) {
    if (typeof raw !== 'object' || raw === null) return ['the body is not a JSON object'];
    const body = raw as Record<string, unknown>;
    const problems: string[] = [];
    if (typeof headers['anthropic-version'] !== 'string') problems.push('anthropic-version: header is required');
    if (typeof body.model !== 'string' || body.model === '') problems.push('model: Field required');
    if (!Number.isInteger(body.max_tokens) || (body.max_tokens as number) < 1) problems.push('max_tokens: Field required');
    if (!Array.isArray(body.messages) || body.messages.length === 0) return [...problems, 'messages: at least one message is required'];
    const thinking = body.thinking as { type?: string; budget_tokens?: number } | undefined;
    if (thinking?.type === 'enabled') {
      const budget = thinking.budget_tokens ?? 0;
      if (budget < 1024) problems.push('thinking.enabled.budget_tokens: Input should be greater than or equal to 1024');
      if (budget >= (body.max_tokens as number)) problems.push('`max_tokens` must be greater than `thinking.budget_tokens`');
      if (body.temperature !== undefined && body.temperature !== 1) problems.push('`temperature` may only be set to 1 when thinking is enabled');
    }
    if (body.system !== undefined && typeof body.system !== 'string' && !(Array.isArray(body.system) && body.system.every((block: Block) => block.type === 'text' && typeof block.text === 'string'))) problems.push('system: a string or a list of text blocks');
    for (const [index, tool] of ((body.tools as Block[] | undefined) ?? []).entries()) {
      if (!/^[a-zA-Z0-9_-]{1,128}$/.test(String(tool.name)) || (tool.input_schema as Block | undefined)?.type !== 'object') problems.push(`tools.${index}: a tool has a name and an input_schema of type object`);
    }
    const messages = body.messages as Message[];
    if (messages[0]?.role !== 'user') problems.push('messages: first message must use the "user" role');
    let marks = countMarks(body.system) + countMarks(body.tools);
    for (const [index, message] of messages.entries()) {
      if (message.role !== 'user' && message.role !== 'assistant') {
        problems.push(`messages.${index}.role: Input should be 'user' or 'assistant'`);
        continue;
      }
      if (index > 0 && messages[index - 1]!.role === message.role) problems.push(`messages.${index}: roles must alternate between "user" and "assistant"`);
      const blocks = blocksOf(message.content);
      marks += countMarks(blocks);
      for (const [at, block] of blocks.entries()) {
        const where = `messages.${index}.content.${at}`;
        if (block.type === 'text' && (typeof block.text !== 'string' || block.text === '')) problems.push(`${where}: text content blocks must be non-empty`);
        if (block.type === 'tool_use' && (typeof block.input !== 'object' || block.input === null || Array.isArray(block.input))) problems.push(`${where}.input: Input should be a valid dictionary`);
        if (block.type === 'thinking' && block.signature !== state.issued.get(`thinking:${String(block.thinking)}`)) problems.push(`${where}: Invalid \`signature\` in \`thinking\` block`);
        if (block.type === 'redacted_thinking' && !state.issued.has(`redacted:${String(block.data)}`)) problems.push(`${where}: Invalid \`data\` in \`redacted_thinking\` block`);
        if ((block.type === 'thinking' || block.type === 'redacted_thinking') && message.role !== 'assistant') problems.push(`${where}: thinking blocks are only allowed in assistant messages`);
      }
      const results = blocks.filter((block) => block.type === 'tool_result');
      const previousUses = new Set(blocksOf(messages[index - 1]?.content).filter((block) => block.type === 'tool_use').map((block) => String(block.id)));
      for (const result of results) {
        if (!previousUses.has(String(result.tool_use_id))) {
          problems.push(`messages.${index}.content.${blocks.indexOf(result)}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${String(result.tool_use_id)}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`);
        }
      }
      const firstOther = blocks.findIndex((block) => block.type !== 'tool_result');
      if (results.length > 0 && firstOther !== -1 && firstOther < blocks.lastIndexOf(results.at(-1)!)) problems.push(`messages.${index}: tool_result blocks must come first in the user message`);
      if (message.role === 'assistant') {
        const uses = blocks.filter((block) => block.type === 'tool_use').map((block) => String(block.id));
        const next = new Set(blocksOf(messages[index + 1]?.content).filter((block) => block.type === 'tool_result').map((block) => String(block.tool_use_id)));
        const missing = uses.filter((id) => !next.has(id));
        if (missing.length > 0 && index + 1 < messages.length) problems.push(`messages.${index}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`);
      }
    }
    // In a tool loop with thinking on, the last assistant turn must start with the thinking it came with.
    const lastAssistant = [...messages].reverse().find((message) => message.role === 'assistant');
    const lastBlocks = blocksOf(lastAssistant?.content);
    const loopCall = lastBlocks.find((block) => block.type === 'tool_use' && state.callsAfterReasoning.has(String(block.id)));
    if (thinking?.type === 'enabled' && loopCall && lastBlocks[0]?.type !== 'thinking' && lastBlocks[0]?.type !== 'redacted_thinking') {
      problems.push(`Expected \`thinking\` or \`redacted_thinking\`, but found \`${String(lastBlocks[0]?.type)}\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block (preceeding the lastmost set of \`tool_use\` and \`tool_result\` blocks).`);
    }
    if (marks > 4) problems.push(`A maximum of 4 blocks with cache_control may be provided. Found ${marks}.`);
    return problems;
  },

  answer({ turn, body, state, index, chunkSize }) {
    const events: Array<{ event: string; data: Record<string, unknown> }> = [];
    const emit = (type: string, data: Record<string, unknown> = {}) => events.push({ event: type, data: { type, ...data } });
    const content: Block[] = [];
    const thinkingOn = (body.thinking as { type?: string } | undefined)?.type === 'enabled';
    const prefix = JSON.stringify([body.system, body.tools]);
    const cacheable = countMarks(body.system) + countMarks(body.tools) > 0;
    const prefixTokens = cacheable ? tokensOf(prefix) : 0;
    const cacheRead = cacheable && state.cachedPrefix === prefix ? prefixTokens : 0;
    const cacheWrite = cacheable && state.cachedPrefix !== prefix ? prefixTokens : 0;
    if (cacheable) state.cachedPrefix = prefix;
    const totalInput = turn.usage?.prompt_tokens ?? tokensOf([body.system, body.messages, body.tools]);
    const inputTokens = Math.max(1, totalInput - cacheRead - cacheWrite);
    emit('message_start', { message: { id: `msg_fake_${index}`, type: 'message', role: 'assistant', model: body.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: inputTokens, cache_creation_input_tokens: cacheWrite, cache_read_input_tokens: cacheRead, output_tokens: 1 } } });
    if (turn.failMidStream && body.stream === true) {
      emit('error', { error: { type: 'overloaded_error', message: 'Overloaded' } });
      return { events };
    }
    const block = (start: Block, deltas: Block[], whole: Block) => {
      const at = content.length;
      emit('content_block_start', { index: at, content_block: start });
      if (at === 0) emit('ping');
      for (const delta of deltas) emit('content_block_delta', { index: at, delta });
      emit('content_block_stop', { index: at });
      content.push(whole);
    };
    const reasoned = Boolean(turn.reasoning && thinkingOn) || Boolean(turn.redactedThinking && thinkingOn);
    if (turn.reasoning && thinkingOn) {
      const signature = sign('thinking', turn.reasoning);
      state.issued.set(`thinking:${turn.reasoning}`, signature);
      block({ type: 'thinking', thinking: '', signature: '' }, [...split(turn.reasoning, chunkSize).map((piece) => ({ type: 'thinking_delta', thinking: piece })), { type: 'signature_delta', signature }], { type: 'thinking', thinking: turn.reasoning, signature });
    }
    if (turn.redactedThinking && thinkingOn) {
      const data = sign('redacted', `${index}`);
      state.issued.set(`redacted:${data}`, true);
      block({ type: 'redacted_thinking', data }, [], { type: 'redacted_thinking', data });
    }
    const text = turn.refusal ?? turn.text;
    if (text) block({ type: 'text', text: '' }, split(text, chunkSize).map((piece) => ({ type: 'text_delta', text: piece })), { type: 'text', text });
    for (const call of turn.toolCalls ?? []) {
      const id = call.id ?? `toolu_fake_${++state.callCounter}`;
      if (reasoned) state.callsAfterReasoning.add(id);
      const args = argumentsText(call.arguments);
      block({ type: 'tool_use', id, name: call.name, input: {} }, [{ type: 'input_json_delta', partial_json: '' }, ...split(args, chunkSize + 1).map((piece) => ({ type: 'input_json_delta', partial_json: piece }))], { type: 'tool_use', id, name: call.name, input: JSON.parse(args) as unknown });
    }
    const stopReason = turn.refusal ? 'refusal' : turn.finishReason === 'length' ? 'max_tokens' : (turn.toolCalls ?? []).length > 0 ? 'tool_use' : 'end_turn';
    const outputTokens = turn.usage?.completion_tokens ?? tokensOf(content);
    if (!turn.omitFinishReason) {
      emit('message_delta', { delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: outputTokens } });
      emit('message_stop');
    }
    const json = { id: `msg_fake_${index}`, type: 'message', role: 'assistant', model: body.model, content, stop_reason: stopReason, stop_sequence: null, usage: { input_tokens: inputTokens, cache_creation_input_tokens: cacheWrite, cache_read_input_tokens: cacheRead, output_tokens: outputTokens } };
    return body.stream === true ? { events } : { json };
  },
};

function blocksOf(content: unknown): Block[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return Array.isArray(content) ? (content as Block[]) : [];
}

function systemText(system: unknown): string {
  if (typeof system === 'string') return system;
  return Array.isArray(system) ? (system as Block[]).map((block) => String(block.text ?? '')).join('\n\n') : '';
}

function countMarks(blocks: unknown): number {
  return Array.isArray(blocks) ? (blocks as Block[]).filter((block) => block && typeof block === 'object' && block.cache_control !== undefined).length : 0;
}
