/**
 * LlmClient over the `openai` SDK (Chat Completions), for OpenAI and any OpenAI-compatible
 * server (vLLM, Ollama, LiteLLM, OpenRouter) and Azure OpenAI. The only module that imports
 * `openai`. Retries are ours (the SDK's are off), see `complete`.
 */
import type { APIError, OpenAI } from 'openai';
import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions';
import { LlmError, type LlmClient, type LlmReasoning, type LlmRequest, type LlmResponse, type LlmSettings } from '../../core/agent/llm.js';
import { ReasoningAccumulator, readContent, type ReasoningSource } from './chat-reasoning.js';
import { DEFAULT_BASE_URL, supportsJsonSchema } from './chat-request-shape.js';
import { encodeChatRequest, type EncodedRequest } from './chat-request-body.js';
import { WIRE_MESSAGE_CODEC } from './chat-message-codec.js';
import { readChatChunks } from './chat-stream-reader.js';
import type { ProtocolClientOptions } from './protocol-attempts.js';
import { ChatChunkAccumulator, extraFieldsOf, normalizeToolCall, usageOf } from './chat-chunk-accumulator.js';
import { AttemptController, LlmAbortError, backoffDelayMs, parseRateLimitResetMs, parseRetryAfterMs, parseRetryHintMs, redact, retryPolicyOf, sleep } from './llm-retry.js';
import { lazyModule } from '../../perf/lazy-module.js';

export { isAbortError, LlmAbortError } from './llm-retry.js';

/** The SDK and its fetch over undici load at the first LLM request, not at start-up (a server that only serves pays nothing for them). */
let sdk: typeof import('openai') | undefined;
let undiciFetch: typeof import('./undici-llm-fetch.js') | undefined;
const loadSdk = lazyModule(async () => {
  const [openai, fetching] = await Promise.all([import('openai'), import('./undici-llm-fetch.js')]);
  undiciFetch = fetching;
  return (sdk = openai);
});

/** The SDK and its fetch loaded before the first request (the server's warm-up). */
export const loadChatModules = (): Promise<unknown> => loadSdk();

/** Which field carries `max_output_tokens`. `auto`: `max_completion_tokens` for OpenAI and Azure, `max_tokens` elsewhere. */
export type MaxTokensParam = 'auto' | 'max_tokens' | 'max_completion_tokens';

export interface OpenAiLlmClientOptions extends ProtocolClientOptions {
  /** Stream responses (default true). Off for providers that cannot stream. */
  stream?: boolean;
  maxTokensParam?: MaxTokensParam;
}

const NO_API_KEY = 'no-api-key';
const MAX_CACHED_CLIENTS = 64;

interface Failure {
  code: LlmError['code'];
  retryable: boolean;
  detail: string;
  status?: number;
  retryAfterMs?: number;
}

/** Thrown inside an attempt; classified by `classify`. */
class AttemptFailure extends Error {
  constructor(readonly failure: Failure) {
    super(failure.detail);
  }
}

export class OpenAiLlmClient implements LlmClient {
  /** Histories keep their messages as the wire text a request carries (chat-message-codec.ts). */
  readonly codec = WIRE_MESSAGE_CODEC;
  private readonly clients = new Map<string, OpenAI>();
  private readonly stream: boolean;

  constructor(private readonly options: OpenAiLlmClientOptions = {}) {
    this.stream = options.stream ?? true;
  }

  /**
   * One completion. Retries 408/409/429/5xx, connection errors, timeouts and broken streams with
   * exponential backoff + jitter (a `retry-after` wins, capped), up to `num_retries` times; a
   * stream that already forwarded text to `onTextDelta` is not retried. Abort rejects at once
   * with an `AbortError`; other failures end as `LlmError`.
   */
  supportsJsonSchema(settings: LlmSettings): boolean {
    return supportsJsonSchema(settings);
  }

  async complete(request: LlmRequest): Promise<LlmResponse> {
    const { settings, signal } = request;
    const policy = retryPolicyOf(settings, this.options);
    const client = this.clientFor(settings, await loadSdk());
    const shaped = encodeChatRequest(request, { stream: this.stream, ...(this.options.maxTokensParam ? { maxTokensParam: this.options.maxTokensParam } : {}) });
    const rateLimitWaitMs = policy.rateLimitWaitMs;
    const retries = policy.retries;
    let waitedMs = 0;
    for (let attempt = 0; ; attempt++) {
      if (signal.aborted) throw new LlmAbortError(signal.reason);
      const progress = { textEmitted: false };
      try {
        return await this.attempt({ client, shaped, request, progress });
      } catch (err) {
        if (signal.aborted) throw new LlmAbortError(signal.reason);
        const failure = err instanceof AttemptFailure ? err.failure : classify(err);
        const delay =
          failure.retryAfterMs !== undefined && policy.honorRetryAfter
            ? Math.min(failure.retryAfterMs, this.options.maxRetryAfterMs ?? 60_000)
            : backoffDelayMs({
                attempt,
                baseDelayMs: policy.baseDelayMs,
                maxDelayMs: policy.maxDelayMs,
                ...(this.options.random ? { random: this.options.random } : {}),
              });
        // A rate limit is waited out for the whole budget, however many attempts that takes.
        const rateLimitLeft = failure.code === 'llm_rate_limited' && waitedMs < rateLimitWaitMs;
        if (!failure.retryable || progress.textEmitted || (attempt >= retries && !rateLimitLeft)) {
          throw toLlmError({ failure, attempts: attempt + 1, settings, textEmitted: progress.textEmitted });
        }
        waitedMs += delay;
        request.onRetry?.({
          attempt: attempt + 1,
          code: failure.code,
          ...(failure.status !== undefined ? { status: failure.status } : {}),
          message: redact(failure.detail, [settings.api_key]),
          delayMs: delay,
        });
        await sleep(delay, signal);
      }
    }
  }

  private async attempt(args: {
    client: OpenAI;
    shaped: EncodedRequest;
    request: LlmRequest;
    progress: { textEmitted: boolean };
  }): Promise<LlmResponse> {
    const { client, shaped, request, progress } = args;
    const timeoutMs = Math.max(1, (request.settings.timeout_s ?? this.options.defaultTimeoutS ?? 600) * 1000);
    // A non-streaming answer has no chunks to wait between: only the attempt's timeout applies.
    const idleMs = shaped.stream ? Math.min(timeoutMs, this.options.idleTimeoutMs ?? 120_000) : timeoutMs;
    const control = new AttemptController(request.signal, { idleMs, totalMs: timeoutMs });
    // The body goes as the text encoded from the history's kept pieces (chat-request-body.ts): a
    // string body with a content-type is sent as it is, the SDK does not encode it again.
    const hasContentType = Object.keys(shaped.headers).some((name) => name.toLowerCase() === 'content-type');
    const requestOptions = {
      path: chatPath(client, shaped),
      body: shaped.text,
      signal: control.signal,
      timeout: timeoutMs,
      maxRetries: 0,
      headers: hasContentType ? shaped.headers : { 'content-type': 'application/json', ...shaped.headers },
    };
    try {
      if (!shaped.stream) {
        const completion = (await client.post(requestOptions.path, { ...requestOptions, stream: false })) as ChatCompletion;
        return checkTruncation(checkFinish(fromCompletion(completion, request.settings)), { fingerprint: completion.system_fingerprint ?? null, shaped, settings: request.settings });
      }
      // The answer as it came (the SDK checked its status), its events read by readChatChunks.
      const response = await client.post(requestOptions.path, { ...requestOptions, stream: true }).asResponse();
      // No body (a 2xx cannot have none, but): no chunk, a broken stream.
      const body = undiciFetch!.answerBodyOf(response) ?? response.body ?? [];
      const chunks = readChatChunks({ body, signal: control.signal, apiError: (error) => new sdk!.APIError(undefined, error as object, undefined, response.headers) }) as AsyncIterable<ChatCompletionChunk>;
      const accumulator = new ChatChunkAccumulator();
      for await (const chunk of chunks) {
        control.touch();
        const { text, reasoning } = accumulator.add(chunk);
        if (reasoning && request.onReasoningDelta) {
          progress.textEmitted = true;
          request.onReasoningDelta(reasoning);
        }
        if (text && request.onTextDelta) {
          progress.textEmitted = true;
          request.onTextDelta(text);
        }
      }
      // The SDK ends the iteration quietly when its signal aborts: find out why.
      if (control.signal.aborted) throw new Error('aborted');
      if (accumulator.chunkCount === 0) {
        throw new AttemptFailure({ code: 'llm_server_error', retryable: true, detail: 'the stream ended without any chunk' });
      }
      if (accumulator.finished === null) {
        throw new AttemptFailure({ code: 'llm_server_error', retryable: true, detail: 'the stream ended without a finish reason (a broken stream)' });
      }
      return checkTruncation(checkFinish(accumulator.result(request.settings, originOf(request.settings))), { fingerprint: accumulator.fingerprint, shaped, settings: request.settings });
    } catch (err) {
      if (control.timedOut && !request.signal.aborted) {
        const detail = control.timedOut === 'idle' ? `no data from the server for ${idleMs / 1000} s (AGENTD_LLM_IDLE_TIMEOUT_S)` : `the answer took longer than ${timeoutMs / 1000} s (timeout_s)`;
        throw new AttemptFailure({ code: 'llm_timeout', retryable: true, detail });
      }
      throw err;
    } finally {
      control.dispose();
    }
  }

  /** One SDK client per (base_url, api_key, api_version); env vars are never read by the SDK. */
  private clientFor(settings: LlmSettings, { AzureOpenAI, OpenAI }: typeof import('openai')): OpenAI {
    const baseUrl = (settings.base_url || DEFAULT_BASE_URL).replace(/\/+$/, '');
    const apiKey = settings.api_key || NO_API_KEY;
    const apiVersion = settings.api_version || undefined;
    const key = [baseUrl, apiKey, apiVersion ?? ''].join('\u0000');
    const cached = this.clients.get(key);
    if (cached) return cached;
    if (!safeUrl(baseUrl)) throw new LlmError('llm_bad_request', `base_url is not a valid URL: ${redact(baseUrl, [apiKey])}`);
    const common = { apiKey, maxRetries: 0, organization: null, project: null, webhookSecret: null, adminAPIKey: null, fetch: undiciFetch!.fetchWithReadableErrors };
    // Azure's classic API (deployments + api-version) needs AzureOpenAI, which routes
    // /openai/deployments/{model}/chat/completions?api-version=… and sends `api-key`. Azure's
    // v1 API (base_url ending in /openai/v1) is plain OpenAI-compatible.
    const isAzureV1 = /\/openai\/v1$/.test(safeUrl(baseUrl)?.pathname ?? '');
    const client =
      apiVersion && !isAzureV1
        ? new AzureOpenAI({ ...common, apiVersion, baseURL: azureBaseUrl(baseUrl) })
        : new OpenAI({
            ...common,
            baseURL: baseUrl,
            ...(apiVersion && apiVersion !== 'v1' ? { defaultQuery: { 'api-version': apiVersion } } : {}),
          });
    if (this.clients.size >= MAX_CACHED_CLIENTS) this.clients.delete(this.clients.keys().next().value as string);
    this.clients.set(key, client);
    return client;
  }
}

/** Who made an answer's reasoning: a later request to another model does not send its opaque parts back. */
function originOf(settings: LlmSettings): LlmReasoning['origin'] {
  return { api: 'chat', model: settings.model, ...(settings.base_url ? { baseUrl: settings.base_url } : {}) };
}

function fromCompletion(completion: ChatCompletion, settings: LlmSettings): LlmResponse {
  const choice = completion.choices?.[0];
  if (!choice) throw new AttemptFailure({ code: 'llm_server_error', retryable: true, detail: 'the response has no choices' });
  // Some servers omit `type`: anything carrying a `function` is a function call.
  const toolCalls = (choice.message.tool_calls ?? []).flatMap((call) => {
    const fn = (call as { function?: { name?: string; arguments?: unknown } }).function;
    return fn ? [normalizeToolCall({ id: call.id, name: fn.name ?? '', arguments: fn.arguments, extra: extraFieldsOf(call as unknown as Record<string, unknown>) })] : [];
  });
  const message = choice.message as typeof choice.message & ReasoningSource;
  const content = readContent(message.content);
  const reasoning = new ReasoningAccumulator();
  reasoning.add(message, content.thinking);
  const refusal = (message.refusal ?? '') + content.refusal;
  return {
    content: content.text || null,
    toolCalls,
    usage: usageOf(completion.usage, settings),
    finishReason: choice.finish_reason ?? null,
    refusal: refusal || null,
    reasoning: reasoning.result(originOf(settings)),
    ...(content.otherParts.length > 0 ? { otherParts: content.otherParts } : {}),
  };
}

/**
 * Finish reasons that make an answer unusable: `error` (OpenRouter, vLLM: the provider failed
 * mid-answer) is retried like a broken stream; `content_filter` is final, and its partial text
 * is not kept.
 */
function checkFinish(response: LlmResponse): LlmResponse {
  if (response.finishReason === 'error') {
    throw new AttemptFailure({ code: 'llm_server_error', retryable: true, detail: 'the provider ended the answer with finish_reason "error"' });
  }
  if (response.finishReason === 'content_filter') {
    throw new AttemptFailure({ code: 'llm_content_filtered', retryable: false, detail: "the provider's content filter stopped the answer (finish_reason content_filter)" });
  }
  return response;
}

/**
 * Ollama does not refuse a prompt longer than its context window (`num_ctx`): it cuts the start
 * and answers anyway, and its usage counts only what it kept. When an Ollama server reports
 * fewer than two thirds of the prompt tokens the request holds (estimated at 4 characters a token), the
 * answer came from a cut prompt: it is a context overflow, with the cure in the message.
 */
function checkTruncation(response: LlmResponse, args: { fingerprint: string | null; shaped: EncodedRequest; settings: LlmSettings }): LlmResponse {
  const ollama = args.fingerprint === 'fp_ollama' || safeUrl(args.settings.base_url ?? '')?.port === '11434';
  const reported = response.usage.prompt_tokens;
  if (!ollama || reported < 1024) return response;
  const estimated = Math.ceil(args.shaped.promptChars / 4);
  if (estimated * 2 < reported * 3) return response; // kept at least two thirds: the estimate errs low on code and JSON
  throw new AttemptFailure({
    code: 'llm_context_exceeded',
    retryable: false,
    detail: `Ollama read ${reported} tokens of a prompt of about ${estimated}: it cut the start of the conversation to fit its context window. Start Ollama with a larger OLLAMA_CONTEXT_LENGTH (e.g. 32768) or a model with a longer context.`,
  });
}

function classify(err: unknown): Failure {
  // Attempts run only once the SDK is loaded (complete() awaits it): its error classes are known here.
  const { APIConnectionError, APIConnectionTimeoutError, APIError } = sdk!;
  if (err instanceof APIConnectionTimeoutError) return { code: 'llm_timeout', retryable: true, detail: 'the request timed out' };
  if (err instanceof APIConnectionError) return { code: 'llm_connection_error', retryable: true, detail: err.message };
  if (err instanceof APIError) {
    const codeAsStatus = typeof err.code === 'string' && /^\d{3}$/.test(err.code) ? Number(err.code) : undefined;
    const status = err.status ?? codeAsStatus;
    const detail = truncate(errorDetail(err));
    const bodyHintMs = parseRetryHintMs(err.error);
    const retryAfterMs = parseRetryAfterMs(err.headers) ?? bodyHintMs ?? parseRateLimitResetMs(err.headers);
    const shouldRetry = err.headers?.get('x-should-retry');
    const base = { detail, ...(status !== undefined ? { status } : {}), ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
    const failure: Failure =
      isQuotaError(err, bodyHintMs !== undefined) ? { ...base, code: 'llm_quota_exceeded', retryable: false } // a 429 that waiting does not cure
      : isContextOverflow(err, status) ? { ...base, code: 'llm_context_exceeded', retryable: false }
      : status === undefined ? { ...base, code: 'llm_server_error', retryable: true } // an error event mid-stream
      : status === 429 ? { ...base, code: 'llm_rate_limited', retryable: true }
      : status === 408 ? { ...base, code: 'llm_timeout', retryable: true }
      : status === 409 ? { ...base, code: 'llm_error', retryable: true }
      : status >= 500 ? { ...base, code: 'llm_server_error', retryable: true }
      : status === 401 || status === 403 ? { ...base, code: 'llm_auth_error', retryable: false }
      : status >= 400 ? { ...base, code: 'llm_bad_request', retryable: false }
      : { ...base, code: 'llm_error', retryable: false };
    if (shouldRetry === 'false') failure.retryable = false;
    if (shouldRetry === 'true' && failure.code !== 'llm_quota_exceeded' && failure.code !== 'llm_context_exceeded') failure.retryable = true;
    return failure;
  }
  if (err instanceof SyntaxError) return { code: 'llm_server_error', retryable: true, detail: `malformed response: ${truncate(err.message)}` };
  const message = err instanceof Error ? err.message : String(err);
  // fetch: "terminated" (socket closed mid-body), "fetch failed"; undici: a socket error code (UND_ERR_SOCKET, ECONNRESET).
  const code = (err as { cause?: { code?: unknown } } | null)?.cause?.code ?? (err as { code?: unknown } | null)?.code;
  if (err instanceof TypeError || typeof code === 'string') {
    return { code: 'llm_connection_error', retryable: true, detail: `connection failed: ${truncate(message)}` };
  }
  return { code: 'llm_error', retryable: false, detail: truncate(message) };
}

/** The provider's own words, as the SDK put them: "400 <message>". */
function errorDetail(err: InstanceType<typeof APIError>): string {
  return err.message;
}

/**
 * `insufficient_quota` (OpenAI), billing and credit errors: retrying cannot help. A 429 whose body
 * says when to retry (Gemini's `RetryInfo` on a per-minute quota, worded "exceeded your current
 * quota") is a rate limit: waiting does cure it.
 */
function isQuotaError(err: InstanceType<typeof APIError>, retryHinted: boolean): boolean {
  const code = String(err.code ?? (err.error as { code?: unknown } | undefined)?.code ?? '');
  if (code === 'insufficient_quota' || code === 'billing_hard_limit_reached') return true;
  if (retryHinted && err.status === 429) return false;
  return (err.status === 429 || err.status === 402) && /insufficient[_ ]quota|exceeded your current quota|billing|out of credits|insufficient credits/i.test(errorDetail(err));
}

/**
 * The prompt does not fit the model's context window, as OpenAI and Azure
 * (`context_length_exceeded`), vLLM and TGI ("maximum context length", "longer than the
 * model's context length"), Anthropic-compatible endpoints ("prompt is too long") and Gemini
 * ("input token count ... exceeds the maximum number of tokens") say it.
 */
const CONTEXT_OVERFLOW = /context[_ ]length[_ ]exceeded|maximum context length|longer than the model'?s context|context window|prompt is too long|input token count.*exceeds|exceeds the maximum number of tokens|too many tokens|reduce the length of the messages|max_new_tokens.*must be <=/i;

/** Machine codes providers give a prompt too long for the window (OpenAI, Azure, Groq, xAI, Mistral, LiteLLM). */
const CONTEXT_OVERFLOW_CODES = new Set(['context_length_exceeded', 'context_window_exceeded', 'model_context_window_exceeded']);

/** By its code (or `type`) where the body has one, else by its wording. */
function isContextOverflow(err: InstanceType<typeof APIError>, status: number | undefined): boolean {
  const body = (err.error ?? {}) as { code?: unknown; type?: unknown };
  const codes = [err.code, body.code, err.type, body.type].filter((value): value is string => typeof value === 'string');
  if (codes.some((code) => CONTEXT_OVERFLOW_CODES.has(code))) return status === undefined || (status >= 400 && status < 500);
  if (status !== undefined && status !== 400 && status !== 413 && status !== 422) return false;
  return CONTEXT_OVERFLOW.test(errorDetail(err));
}

function toLlmError(args: { failure: Failure; attempts: number; settings: LlmSettings; textEmitted: boolean }): LlmError {
  const { failure, attempts, settings, textEmitted } = args;
  const origin = safeUrl(settings.base_url || DEFAULT_BASE_URL)?.origin ?? 'the configured base_url';
  const tries = attempts > 1 ? ` after ${attempts} attempts` : '';
  const midStream = textEmitted && failure.retryable ? ' (not retried: the response had started streaming)' : '';
  const message = `LLM request to ${origin} for model "${settings.model}" failed${tries}: ${failure.detail}${midStream}`;
  return new LlmError(failure.code, redact(message, [settings.api_key]), failure.status, { outputStarted: textEmitted });
}

/**
 * Where the request goes: `/chat/completions`, or for Azure's classic API the deployment named
 * by the model, as the SDK's AzureOpenAI routes an object body (it cannot read a text one).
 */
function chatPath(client: OpenAI, shaped: EncodedRequest): string {
  if (client instanceof sdk!.AzureOpenAI && shaped.model !== undefined && !client.baseURL.includes('/deployments')) return `/deployments/${String(shaped.model)}/chat/completions`;
  return '/chat/completions';
}

function azureBaseUrl(baseUrl: string): string {
  return /\/openai(\/|$)/.test(safeUrl(baseUrl)?.pathname ?? '') ? baseUrl : `${baseUrl}/openai`;
}

function safeUrl(url: string): URL | undefined {
  try {
    return new URL(url);
  } catch {
    return undefined;
  }
}

function truncate(text: string, max = 500): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
