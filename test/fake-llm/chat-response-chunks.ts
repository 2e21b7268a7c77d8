/**
 * Turns a scripted response into what OpenAI sends: SSE chunks (role chunk, content split in
 * small deltas, tool calls with `index`/`id`/`name` first and `arguments` in small pieces, a
 * finish chunk, a usage chunk when asked) or one `chat.completion` JSON body.
 */
import type { ChatRequestBody, FakeResponseTurn, FakeUsage } from './fake-llm-types.js';
import type { ProviderProfile } from './provider-profiles.js';

export interface ResponseShape {
  turn: FakeResponseTurn;
  request: ChatRequestBody;
  profile: ProviderProfile;
  /** Ids for the turn's tool calls (scripted or generated), in order. */
  toolCallIds: string[];
  /** Fields the provider attaches to each tool call, in order. */
  toolCallExtras: Record<string, unknown>[];
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
    system_fingerprint: shape.profile.systemFingerprint ?? 'fp_fake',
    choices,
    ...(includeUsage ? { usage: null } : {}),
    ...extra,
  });
  const delta = (d: Record<string, unknown>, finishReason: string | null = null): unknown =>
    chunk([{ index: 0, delta: d, logprobs: null, finish_reason: finishReason }]);

  const { profile } = shape;
  const chunks: unknown[] = [delta({ role: 'assistant', content: '', refusal: null })];
  if (turn.reasoning) for (const piece of split(turn.reasoning, shape.textChunkSize)) chunks.push(delta({ [profile.reasoningField ?? 'reasoning_content']: piece }));
  for (const piece of split(turn.text ?? '', shape.textChunkSize)) chunks.push(delta({ content: piece }));
  if (turn.refusal) for (const piece of split(turn.refusal, shape.textChunkSize)) chunks.push(delta({ refusal: piece }));
  (turn.toolCalls ?? []).forEach((call, index) => {
    const id = shape.toolCallIds[index];
    const extra = shape.toolCallExtras[index] ?? {};
    if (profile.wholeToolCalls) {
      chunks.push(delta({ tool_calls: [{ id, type: 'function', function: { name: call.name, arguments: argumentsText(call.arguments) }, ...extra }] }));
      return;
    }
    chunks.push(delta({ tool_calls: [{ index, id, type: 'function', function: { name: call.name, arguments: '' }, ...extra }] }));
    for (const piece of split(argumentsText(call.arguments), shape.argumentsChunkSize)) {
      chunks.push(delta({ tool_calls: [{ index, function: { arguments: piece } }] }));
    }
  });
  const usage = usageOf(shape);
  if (turn.omitFinishReason) {
    // The stream ends cleanly with [DONE], but the last choice chunk never came.
  } else if (profile.usageOnFinishChunk && includeUsage && usage) {
    chunks.push(chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: finishReasonOf(shape) }], { usage }));
    return chunks;
  } else {
    chunks.push(delta({}, finishReasonOf(shape)));
  }
  if (includeUsage && usage) chunks.push(chunk([], { usage }));
  return chunks;
}

export function completionBody(shape: ResponseShape): unknown {
  const { turn, request } = shape;
  const toolCalls = (turn.toolCalls ?? []).map((call, index) => ({
    id: shape.toolCallIds[index],
    type: 'function',
    function: { name: call.name, arguments: argumentsText(call.arguments) },
    ...shape.toolCallExtras[index],
  }));
  const usage = usageOf(shape);
  return {
    id: shape.responseId,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: request.model ?? 'fake-model',
    system_fingerprint: shape.profile.systemFingerprint ?? 'fp_fake',
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: turn.text ?? null, refusal: turn.refusal ?? null, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) },
        logprobs: null,
        finish_reason: finishReasonOf(shape),
      },
    ],
    ...(usage ? { usage } : {}),
  };
}

export function argumentsText(args: Record<string, unknown> | string | undefined): string {
  return typeof args === 'string' ? args : JSON.stringify(args ?? {});
}

function finishReasonOf({ turn, profile }: ResponseShape): string {
  return turn.finishReason ?? ((turn.toolCalls ?? []).length > 0 ? (profile.toolCallsFinishReason ?? 'tool_calls') : 'stop');
}

/**
 * Scripted usage, or an estimate (~4 characters a token); null when the turn says none. A
 * profile with a context window reports no more prompt tokens than fit in it (Ollama cuts the
 * start of a longer prompt silently), and a profile may add cost and token details.
 */
function usageOf(shape: ResponseShape): Record<string, unknown> | null {
  const { turn, request, profile } = shape;
  if (turn.usage === null) return null;
  const outputChars = (turn.text ?? '').length + (turn.toolCalls ?? []).reduce((n, c) => n + c.name.length + argumentsText(c.arguments).length, 0);
  const estimated: FakeUsage = turn.usage ?? {
    prompt_tokens: Math.ceil(JSON.stringify([request.messages ?? [], request.tools ?? []]).length / 4),
    completion_tokens: Math.max(1, Math.ceil(outputChars / 4)),
  };
  const usage = { ...estimated, prompt_tokens: Math.min(estimated.prompt_tokens, profile.contextTokens ?? Infinity) };
  return { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens, ...profile.usageDetails?.(usage) };
}

function split(text: string, size: number): string[] {
  const pieces: string[] = [];
  for (let i = 0; i < text.length; i += size) pieces.push(text.slice(i, i + size));
  return pieces;
}
