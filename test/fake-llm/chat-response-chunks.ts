/**
 * Turns a scripted response into what OpenAI sends: SSE chunks (role chunk, content split in
 * small deltas, tool calls with `index`/`id`/`name` first and `arguments` in small pieces, a
 * finish chunk, a usage chunk when asked) or one `chat.completion` JSON body.
 */
import type { ChatRequestBody, FakeResponseTurn, FakeUsage } from './fake-llm-types.js';

export interface ResponseShape {
  turn: FakeResponseTurn;
  request: ChatRequestBody;
  /** Ids for the turn's tool calls (scripted or generated), in order. */
  toolCallIds: string[];
  responseId: string;
  textChunkSize: number;
  argumentsChunkSize: number;
}

export function streamChunks(shape: ResponseShape): unknown[] {
  const { turn, request } = shape;
  const includeUsage = request.stream_options?.include_usage === true;
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}): unknown => ({
    id: shape.responseId,
    object: 'chat.completion.chunk',
    created: Math.floor(Date.now() / 1000),
    model: request.model ?? 'fake-model',
    system_fingerprint: 'fp_fake',
    choices,
    ...(includeUsage ? { usage: null } : {}),
    ...extra,
  });
  const delta = (d: Record<string, unknown>, finishReason: string | null = null): unknown =>
    chunk([{ index: 0, delta: d, logprobs: null, finish_reason: finishReason }]);

  const chunks: unknown[] = [delta({ role: 'assistant', content: '', refusal: null })];
  for (const piece of split(turn.text ?? '', shape.textChunkSize)) chunks.push(delta({ content: piece }));
  (turn.toolCalls ?? []).forEach((call, index) => {
    const id = shape.toolCallIds[index];
    chunks.push(delta({ tool_calls: [{ index, id, type: 'function', function: { name: call.name, arguments: '' } }] }));
    for (const piece of split(argumentsText(call.arguments), shape.argumentsChunkSize)) {
      chunks.push(delta({ tool_calls: [{ index, function: { arguments: piece } }] }));
    }
  });
  chunks.push(delta({}, finishReasonOf(turn)));
  const usage = usageOf(shape);
  if (includeUsage && usage) chunks.push(chunk([], { usage }));
  return chunks;
}

export function completionBody(shape: ResponseShape): unknown {
  const { turn, request } = shape;
  const toolCalls = (turn.toolCalls ?? []).map((call, index) => ({
    id: shape.toolCallIds[index],
    type: 'function',
    function: { name: call.name, arguments: argumentsText(call.arguments) },
  }));
  const usage = usageOf(shape);
  return {
    id: shape.responseId,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: request.model ?? 'fake-model',
    system_fingerprint: 'fp_fake',
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: turn.text ?? null, refusal: null, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) },
        logprobs: null,
        finish_reason: finishReasonOf(turn),
      },
    ],
    ...(usage ? { usage } : {}),
  };
}

export function argumentsText(args: Record<string, unknown> | string | undefined): string {
  return typeof args === 'string' ? args : JSON.stringify(args ?? {});
}

function finishReasonOf(turn: FakeResponseTurn): string {
  return turn.finishReason ?? ((turn.toolCalls ?? []).length > 0 ? 'tool_calls' : 'stop');
}

/** Scripted usage, or an estimate (~4 characters a token); null when the turn says none. */
function usageOf(shape: ResponseShape): (FakeUsage & { total_tokens: number }) | null {
  const { turn, request } = shape;
  if (turn.usage === null) return null;
  const outputChars = (turn.text ?? '').length + (turn.toolCalls ?? []).reduce((n, c) => n + c.name.length + argumentsText(c.arguments).length, 0);
  const usage = turn.usage ?? {
    prompt_tokens: Math.ceil(JSON.stringify([request.messages ?? [], request.tools ?? []]).length / 4),
    completion_tokens: Math.max(1, Math.ceil(outputChars / 4)),
  };
  return { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens };
}

function split(text: string, size: number): string[] {
  const pieces: string[] = [];
  for (let i = 0; i < text.length; i += size) pieces.push(text.slice(i, i + size));
  return pieces;
}
