/**
 * LlmClient for OpenAI's Responses API (and Azure's), over undici like the chat path: the same
 * event reader (chat-stream-reader.ts) reads its server-sent events, and the SDK's own stream
 * reader is not used because llmFetch hands event streams to that reader only. Its events map
 * onto the port: output text to onTextDelta, reasoning summaries to onReasoningDelta, each
 * finished output item to the answer (reasoning items kept whole in `reasoning.providerData`).
 */
import type { LlmClient, LlmReasoning, LlmRequest, LlmResponse, LlmSettings, LlmToolCall } from '../../core/agent/llm.js';
import { usageOf } from './chat-chunk-accumulator.js';
import { AttemptFailure, classifyAnswer, completeWithRetries, originOf, postAndRead, type AnswerReader, type AttemptContext, type ErrorReading, type ProtocolClientOptions } from './protocol-attempts.js';
import { buildResponsesRequest } from './responses-request.js';

/** The words and codes OpenAI and Azure answer an input longer than the context window with. */
const CONTEXT_OVERFLOW = /context[_ ]length[_ ]exceeded|exceeds the context window|maximum context length|too many tokens/i;

export const RESPONSES_ERRORS: ErrorReading = {
  describe(body, text) {
    const error = (body as { error?: { message?: unknown; code?: unknown; type?: unknown } } | undefined)?.error;
    if (error && typeof error === 'object') {
      return { message: typeof error.message === 'string' ? error.message : text, ...(typeof error.code === 'string' ? { code: error.code } : {}), ...(typeof error.type === 'string' ? { type: error.type } : {}) };
    }
    return { message: text.slice(0, 500) };
  },
  isContextOverflow(error, status) {
    if (status !== undefined && status !== 400 && status !== 413) return false;
    return error.code === 'context_length_exceeded' || CONTEXT_OVERFLOW.test(error.message);
  },
};

export class ResponsesLlmClient implements LlmClient {
  constructor(private readonly options: ProtocolClientOptions & { stream?: boolean } = {}) {}

  supportsJsonSchema(): boolean {
    return true;
  }

  async complete(request: LlmRequest): Promise<LlmResponse> {
    const origin = originOf(request.settings.base_url || 'https://api.openai.com');
    const call = buildResponsesRequest(request, { stream: this.options.stream ?? true });
    const text = JSON.stringify(call.body);
    return completeWithRetries({
      request,
      options: this.options,
      origin,
      attempt: (context) => postAndRead({ url: call.url, headers: call.headers, body: text, stream: call.stream, context, errors: RESPONSES_ERRORS, reader: new ResponsesReader(request, context) }),
    });
  }
}


interface OutputItem {
  type?: string;
  call_id?: string;
  name?: string;
  arguments?: string;
  content?: Array<{ type?: string; text?: string; refusal?: string }>;
  summary?: Array<{ type?: string; text?: string }>;
  [field: string]: unknown;
}

interface ResponseObject {
  status?: string;
  output?: OutputItem[];
  usage?: { input_tokens?: number; output_tokens?: number; input_tokens_details?: { cached_tokens?: number }; output_tokens_details?: { reasoning_tokens?: number } } | null;
  incomplete_details?: { reason?: string } | null;
  error?: { code?: string; message?: string } | null;
}

/** The answer as its events arrive. */
class ResponsesReader implements AnswerReader<ResponseObject> {
  private text = '';
  private streamedText = '';
  private refusal = '';
  private reasoningText = '';
  private readonly reasoningItems: OutputItem[] = [];
  private readonly calls: LlmToolCall[] = [];
  private final: ResponseObject | null = null;
  private readonly settings: LlmSettings;

  constructor(
    private readonly request: LlmRequest,
    private readonly context: AttemptContext,
  ) {
    this.settings = request.settings;
  }

  add(event: Record<string, unknown>): void {
    switch (event.type) {
      case 'response.output_text.delta':
        return this.textDelta(String(event.delta ?? ''));
      case 'response.reasoning_summary_text.delta':
      case 'response.reasoning_text.delta':
        return this.reasoningDelta(event.delta);
      case 'response.output_item.done':
        return this.item(event.item as OutputItem);
      case 'response.completed':
      case 'response.incomplete':
        return this.completed(event.response as ResponseObject, true);
      case 'response.failed':
        throw this.failure((event.response as ResponseObject | undefined)?.error ?? {});
      case 'error':
        throw this.failure(event as { code?: string; message?: string });
    }
  }

  /** The final response object: its items too when no event gave them (a non-streamed answer). */
  whole(response: ResponseObject): void {
    this.completed(response);
  }

  completed(response: ResponseObject, streamed = false): void {
    if (response.status === 'failed') throw this.failure(response.error ?? {});
    this.final = response;
    if (!streamed) for (const item of response.output ?? []) this.item(item);
  }

  result(): LlmResponse {
    const final = this.final;
    if (final === null) throw new AttemptFailure({ code: 'llm_server_error', retryable: true, detail: 'the stream ended before response.completed (a broken stream)' });
    const incomplete = final.status === 'incomplete' ? (final.incomplete_details?.reason ?? 'incomplete') : null;
    if (incomplete === 'content_filter') throw new AttemptFailure({ code: 'llm_content_filtered', retryable: false, detail: "the provider's content filter stopped the answer (incomplete: content_filter)" });
    const usage = final.usage
      ? usageOf({ prompt_tokens: final.usage.input_tokens, completion_tokens: final.usage.output_tokens, prompt_tokens_details: { cached_tokens: final.usage.input_tokens_details?.cached_tokens ?? 0 }, completion_tokens_details: { reasoning_tokens: final.usage.output_tokens_details?.reasoning_tokens ?? 0 } }, this.settings)
      : usageOf(null, this.settings);
    const reasoning: LlmReasoning | null =
      this.reasoningItems.length > 0
        ? { text: this.settings.reasoning?.show === false ? '' : this.reasoningText, origin: { api: 'responses', model: this.settings.model, ...(this.settings.base_url ? { baseUrl: this.settings.base_url } : {}) }, providerData: this.reasoningItems }
        : null;
    return {
      content: (this.text || this.streamedText) === '' ? null : this.text || this.streamedText,
      toolCalls: this.calls,
      usage,
      finishReason: incomplete !== null ? (incomplete === 'max_output_tokens' ? 'length' : incomplete) : this.calls.length > 0 ? 'tool_calls' : 'stop',
      refusal: this.refusal === '' ? null : this.refusal,
      reasoning,
    };
  }

  private textDelta(delta: string): void {
    if (delta === '') return;
    this.streamedText += delta;
    if (!this.request.onTextDelta) return;
    this.context.progress.textEmitted = true;
    this.request.onTextDelta(delta);
  }

  /** Shown reasoning is output too: once it reached the caller the answer is not asked again here. */
  private reasoningDelta(delta: unknown): void {
    if (this.settings.reasoning?.show === false || typeof delta !== 'string' || delta === '' || !this.request.onReasoningDelta) return;
    this.context.progress.textEmitted = true;
    this.request.onReasoningDelta(delta);
  }

  private item(item: OutputItem | undefined): void {
    if (!item) return;
    if (item.type === 'reasoning') {
      this.reasoningItems.push(item);
      const text = [...(item.summary ?? []), ...((item.content as OutputItem['summary']) ?? [])].map((part) => part.text ?? '').filter((part) => part !== '').join('\n\n');
      this.reasoningText = [this.reasoningText, text].filter((part) => part !== '').join('\n\n');
    } else if (item.type === 'function_call') {
      this.calls.push({ id: item.call_id ?? '', name: item.name ?? '', arguments: item.arguments ?? '' });
    } else if (item.type === 'message') {
      for (const part of item.content ?? []) {
        if (part.type === 'output_text') this.text += part.text ?? '';
        if (part.type === 'refusal') this.refusal += part.refusal ?? '';
      }
    }
  }

  private failure(error: { code?: string | null; message?: string | null }): AttemptFailure {
    const body = { error: { message: error.message ?? 'the response failed', ...(error.code ? { code: error.code } : {}) } };
    return new AttemptFailure(classifyAnswer({ status: undefined, headers: new Headers(), body, text: JSON.stringify(body), errors: RESPONSES_ERRORS }));
  }
}
