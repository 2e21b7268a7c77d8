/**
 * LlmClient for Anthropic's Messages API over undici (no SDK: one POST and its server-sent
 * events, read by the chat path's event reader). Content blocks are assembled by index: text to
 * onTextDelta, thinking to onReasoningDelta, tool_use input from its JSON pieces; thinking and
 * redacted_thinking blocks are kept whole (with their signatures) in `reasoning.providerData`.
 */
import type { LlmClient, LlmReasoning, LlmRequest, LlmResponse, LlmSettings, LlmToolCall } from '../../core/agent/llm.js';
import { usageOf } from './chat-chunk-accumulator.js';
import { AttemptFailure, completeWithRetries, originOf, postAndRead, type AnswerReader, type AttemptContext, type ErrorReading, type ProtocolClientOptions } from './protocol-attempts.js';
import { ANTHROPIC_BASE_URL, buildAnthropicRequest } from './anthropic-request.js';

/** "prompt is too long: 210000 tokens > 200000 maximum"; a body over the request size limit is 413 `request_too_large`. */
const CONTEXT_OVERFLOW = /prompt is too long|context window|input length and `max_tokens` exceed context limit|too many tokens/i;

export const ANTHROPIC_ERRORS: ErrorReading = {
  describe(body, text) {
    const error = (body as { error?: { message?: unknown; type?: unknown } } | undefined)?.error;
    if (error && typeof error === 'object') return { message: typeof error.message === 'string' ? error.message : text, ...(typeof error.type === 'string' ? { type: error.type } : {}) };
    return { message: text.slice(0, 500) };
  },
  isContextOverflow(error, status) {
    if (status === 413 || error.type === 'request_too_large') return true;
    if (status !== undefined && status !== 400) return false;
    return CONTEXT_OVERFLOW.test(error.message);
  },
};

/** stop_reason as the port's finish reasons. */
const FINISH: Record<string, string> = { end_turn: 'stop', stop_sequence: 'stop', pause_turn: 'stop', tool_use: 'tool_calls', max_tokens: 'length', model_context_window_exceeded: 'length', refusal: 'refusal' };

export class AnthropicLlmClient implements LlmClient {
  constructor(private readonly options: ProtocolClientOptions & { stream?: boolean } = {}) {}

  supportsJsonSchema(): boolean {
    return false;
  }

  async complete(request: LlmRequest): Promise<LlmResponse> {
    const call = buildAnthropicRequest(request, { stream: this.options.stream ?? true });
    const text = JSON.stringify(call.body);
    return completeWithRetries({
      request,
      options: this.options,
      origin: originOf(request.settings.base_url || ANTHROPIC_BASE_URL),
      attempt: (context) => postAndRead({ url: call.url, headers: call.headers, body: text, stream: call.stream, context, errors: ANTHROPIC_ERRORS, reader: new MessageReader(request, context) }),
    });
  }
}

type Block = { type?: string; text?: string; thinking?: string; signature?: string; data?: string; id?: string; name?: string; input?: unknown; [field: string]: unknown };

interface UsageObject {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_input_tokens?: number | null;
  cache_creation_input_tokens?: number | null;
}

interface MessageObject {
  content?: Block[];
  stop_reason?: string | null;
  usage?: UsageObject;
}

class MessageReader implements AnswerReader<MessageObject> {
  private readonly blocks: Block[] = [];
  /** The JSON text of each tool_use block's input, by index. */
  private readonly inputs = new Map<number, string>();
  private usage: UsageObject = {};
  private stopReason: string | null = null;
  private started = false;
  private stopped = false;
  private readonly settings: LlmSettings;

  constructor(
    private readonly request: LlmRequest,
    private readonly context: AttemptContext,
  ) {
    this.settings = request.settings;
  }

  add(event: Record<string, unknown>): void {
    const index = typeof event.index === 'number' ? event.index : -1;
    switch (event.type) {
      case 'message_start':
        this.started = true;
        this.usage = { ...((event.message as MessageObject | undefined)?.usage ?? {}) };
        return;
      case 'content_block_start':
        this.blocks[index] = { ...(event.content_block as Block) };
        if (this.blocks[index].type === 'tool_use') this.inputs.set(index, '');
        return;
      case 'content_block_delta':
        return this.delta(index, event.delta as Record<string, unknown>);
      case 'message_delta': {
        const delta = event.delta as { stop_reason?: string | null } | undefined;
        if (delta?.stop_reason) this.stopReason = delta.stop_reason;
        // The final counts: output_tokens always, the input counts when the server sends them again.
        for (const [name, value] of Object.entries((event.usage as UsageObject | undefined) ?? {})) if (typeof value === 'number' && (value > 0 || name === 'output_tokens')) (this.usage as Record<string, number>)[name] = value;
        return;
      }
      case 'message_stop':
        this.stopped = true;
        return;
    }
  }

  /** A whole message (a non-streamed answer). */
  whole(message: MessageObject): void {
    this.started = this.stopped = true;
    this.blocks.push(...(message.content ?? []));
    this.stopReason = message.stop_reason ?? null;
    this.usage = message.usage ?? {};
  }

  result(): LlmResponse {
    if (!this.started || !this.stopped) throw new AttemptFailure({ code: 'llm_server_error', retryable: true, detail: 'the stream ended before message_stop (a broken stream)' });
    const show = this.settings.reasoning?.show !== false;
    let text = '';
    const calls: LlmToolCall[] = [];
    const thinking: Block[] = [];
    for (const [index, block] of this.blocks.entries()) {
      if (!block) continue;
      if (block.type === 'text') text += block.text ?? '';
      else if (block.type === 'thinking' || block.type === 'redacted_thinking') thinking.push(block);
      else if (block.type === 'tool_use') {
        const input = this.inputs.get(index);
        calls.push({ id: block.id ?? '', name: block.name ?? '', arguments: input !== undefined && input !== '' ? input : JSON.stringify(block.input ?? {}) });
      }
    }
    const reasoning: LlmReasoning | null =
      thinking.length > 0
        ? {
            text: show ? thinking.map((block) => block.thinking ?? '').filter((part) => part !== '').join('\n\n') : '',
            origin: { api: 'anthropic', model: this.settings.model, ...(this.settings.base_url ? { baseUrl: this.settings.base_url } : {}) },
            providerData: thinking,
          }
        : null;
    const finish = this.stopReason === null ? null : (FINISH[this.stopReason] ?? this.stopReason);
    const refused = this.stopReason === 'refusal';
    const read = count(this.usage.cache_read_input_tokens);
    const written = count(this.usage.cache_creation_input_tokens);
    const usage = usageOf({ prompt_tokens: count(this.usage.input_tokens) + read + written, completion_tokens: count(this.usage.output_tokens), prompt_tokens_details: { cached_tokens: read } }, this.settings);
    return {
      content: text === '' || refused ? null : text,
      toolCalls: refused ? [] : calls,
      usage,
      finishReason: finish,
      refusal: refused ? text || 'The model declined to answer (stop_reason: refusal).' : null,
      reasoning,
    };
  }

  private delta(index: number, delta: Record<string, unknown> | undefined): void {
    const block = this.blocks[index];
    if (!block || !delta) return;
    switch (delta.type) {
      case 'text_delta': {
        const piece = String(delta.text ?? '');
        block.text = (block.text ?? '') + piece;
        if (piece !== '' && this.request.onTextDelta) {
          this.context.progress.textEmitted = true;
          this.request.onTextDelta(piece);
        }
        return;
      }
      case 'thinking_delta': {
        const piece = String(delta.thinking ?? '');
        block.thinking = (block.thinking ?? '') + piece;
        // Shown reasoning is output too: once it reached the caller the answer is not asked again here.
        if (piece !== '' && this.settings.reasoning?.show !== false && this.request.onReasoningDelta) {
          this.context.progress.textEmitted = true;
          this.request.onReasoningDelta(piece);
        }
        return;
      }
      case 'signature_delta':
        block.signature = (block.signature ?? '') + String(delta.signature ?? '');
        return;
      case 'input_json_delta':
        this.inputs.set(index, (this.inputs.get(index) ?? '') + String(delta.partial_json ?? ''));
        return;
    }
  }
}

function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? Math.floor(value) : 0;
}
