/**
 * What the Responses and Anthropic clients share: one POST over undici, the classification of a
 * failed answer into LlmError codes, and the retry loop around attempts (backoff with jitter, a
 * server's retry-after wins, rate limits waited out for a budget, all as `llm.retry` says:
 * retryPolicyOf). Nothing is retried once text or reasoning reached the caller: that failure
 * says so in `outputStarted`, and the fallback router asks the same model again rather than
 * another. The chat client keeps its own loop over the openai SDK's errors.
 */
import type { Dispatcher } from 'undici';
import { lazyModule } from '../../perf/lazy-module.js';

/** undici loads at the first request of these protocols, not at start-up (as the chat client's: openai-llm.ts). */
const loadUndici = lazyModule(() => import('undici'));
import { LlmError, type LlmRequest, type LlmResponse, type LlmSettings } from '../../core/agent/llm.js';
import { AttemptController, LlmAbortError, backoffDelayMs, parseRateLimitResetMs, parseRetryAfterMs, redact, retryPolicyOf, sleep, type RetryDefaults } from './llm-retry.js';
import { readChatChunks } from './chat-stream-reader.js';

/** undici loaded before the first request of these protocols (the server's warm-up). */
export const loadProtocolModules = (): Promise<unknown> => loadUndici();

/** How every protocol's client retries and times its attempts (the chat client's options too). */
export interface ProtocolClientOptions extends RetryDefaults {
  /** Cap on a server's `retry-after` (default 60 s). */
  maxRetryAfterMs?: number;
  /** Used when `settings.timeout_s` is not set (default 600): the longest one attempt may take in all. */
  defaultTimeoutS?: number;
  /** The longest a streaming attempt may go without a chunk (default 120 s; never more than the attempt's timeout). */
  idleTimeoutMs?: number;
  /** Jitter source, for tests. */
  random?: () => number;
}

export interface Failure {
  code: LlmError['code'];
  retryable: boolean;
  detail: string;
  status?: number;
  retryAfterMs?: number;
}

/** Thrown inside an attempt with its class already known. */
export class AttemptFailure extends Error {
  constructor(readonly failure: Failure) {
    super(failure.detail);
  }
}

/** What an attempt tells the loop: whether text or reasoning reached the caller (then it is not retried). */
export interface AttemptProgress {
  textEmitted: boolean;
}

export interface AttemptContext {
  signal: AbortSignal;
  progress: AttemptProgress;
  /** Call on each event of the stream: it restarts the idle timer. */
  touch(): void;
}

/** How a protocol reads its error bodies. */
export interface ErrorReading {
  /** The provider's words and its error code/type, from a body (JSON or not). */
  describe(body: unknown, text: string): { message: string; code?: string; type?: string };
  /** Whether this error says the prompt does not fit the context window. */
  isContextOverflow(error: { message: string; code?: string; type?: string }, status: number | undefined): boolean;
}

/** One completion with retries; `attempt` does one request and returns the answer or throws. */
export async function completeWithRetries(args: {
  request: LlmRequest;
  options: ProtocolClientOptions;
  origin: string;
  attempt: (context: AttemptContext) => Promise<LlmResponse>;
}): Promise<LlmResponse> {
  const { request, options } = args;
  const { settings, signal } = request;
  const policy = retryPolicyOf(settings, options);
  const { retries, rateLimitWaitMs } = policy;
  const timeoutMs = Math.max(1, (settings.timeout_s ?? options.defaultTimeoutS ?? 600) * 1000);
  const idleMs = Math.min(timeoutMs, options.idleTimeoutMs ?? 120_000);
  let waitedMs = 0;
  for (let attempt = 0; ; attempt++) {
    if (signal.aborted) throw new LlmAbortError(signal.reason);
    const progress: AttemptProgress = { textEmitted: false };
    const control = new AttemptController(signal, { idleMs, totalMs: timeoutMs });
    let failure: Failure;
    try {
      return await args.attempt({ signal: control.signal, progress, touch: () => control.touch() });
    } catch (err) {
      if (signal.aborted) throw new LlmAbortError(signal.reason);
      if (control.timedOut) {
        const detail = control.timedOut === 'idle' ? `no data from the server for ${idleMs / 1000} s (AGENTD_LLM_IDLE_TIMEOUT_S)` : `the answer took longer than ${timeoutMs / 1000} s (timeout_s)`;
        failure = { code: 'llm_timeout', retryable: true, detail };
      } else failure = err instanceof AttemptFailure ? err.failure : classifyThrown(err);
    } finally {
      control.dispose();
    }
    const delay =
      failure.retryAfterMs !== undefined && policy.honorRetryAfter
        ? Math.min(failure.retryAfterMs, options.maxRetryAfterMs ?? 60_000)
        : backoffDelayMs({ attempt, baseDelayMs: policy.baseDelayMs, maxDelayMs: policy.maxDelayMs, ...(options.random ? { random: options.random } : {}) });
    const rateLimitLeft = failure.code === 'llm_rate_limited' && waitedMs < rateLimitWaitMs;
    if (!failure.retryable || progress.textEmitted || (attempt >= retries && !rateLimitLeft)) {
      throw toLlmError({ failure, attempts: attempt + 1, settings, origin: args.origin, textEmitted: progress.textEmitted });
    }
    waitedMs += delay;
    request.onRetry?.({ attempt: attempt + 1, code: failure.code, ...(failure.status !== undefined ? { status: failure.status } : {}), message: redact(failure.detail, [settings.api_key]), delayMs: delay });
    await sleep(delay, signal);
  }
}

export interface PostedAnswer {
  status: number;
  headers: Headers;
  body: Dispatcher.ResponseData['body'];
}

/** How a protocol reads its answer: whole (a non-streamed request), or event by event. */
export interface AnswerReader<Whole> {
  whole(answer: Whole): void;
  add(event: Record<string, unknown>): void;
  result(): LlmResponse;
}

/** One attempt of a protocol's request: POSTs `body` and feeds the answer, whole or streamed, to `reader`. */
export async function postAndRead<Whole>(args: { url: string; headers: Record<string, string>; body: string; stream: boolean; context: AttemptContext; errors: ErrorReading; reader: AnswerReader<Whole> }): Promise<LlmResponse> {
  const { context, errors, reader } = args;
  const answer = await postJson({ url: args.url, headers: args.headers, body: args.body, signal: context.signal, errors });
  if (!args.stream) {
    reader.whole(JSON.parse(await answer.body.text()) as Whole);
    return reader.result();
  }
  for await (const event of readJsonEvents(answer.body, context.signal, errors)) {
    context.touch();
    reader.add(event);
  }
  if (context.signal.aborted) throw new Error('aborted');
  return reader.result();
}

/** POSTs a JSON text; a non-2xx answer throws its classified AttemptFailure. */
export async function postJson(args: { url: string; headers: Record<string, string>; body: string; signal: AbortSignal; errors: ErrorReading }): Promise<PostedAnswer> {
  const undici = await loadUndici();
  const answer = await undici.request(args.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...args.headers },
    body: args.body,
    signal: args.signal,
    dispatcher: undici.getGlobalDispatcher(),
  });
  const headers = new Headers();
  for (const [name, value] of Object.entries(answer.headers)) {
    if (Array.isArray(value)) for (const item of value) headers.append(name, item);
    else if (value !== undefined) headers.append(name, value);
  }
  if (answer.statusCode >= 200 && answer.statusCode < 300) return { status: answer.statusCode, headers, body: answer.body };
  const text = await answer.body.text().catch(() => '');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  throw new AttemptFailure(classifyAnswer({ status: answer.statusCode, headers, body: parsed, text, errors: args.errors }));
}

/** The JSON events of a streamed answer; an event with an `error` member throws its classified failure. */
export function readJsonEvents(body: Dispatcher.ResponseData['body'], signal: AbortSignal, errors: ErrorReading): AsyncIterable<Record<string, unknown>> {
  return readChatChunks({
    body,
    signal,
    apiError: (error) => new AttemptFailure(classifyAnswer({ status: undefined, headers: new Headers(), body: { error }, text: JSON.stringify(error), errors })),
  }) as AsyncIterable<Record<string, unknown>>;
}

/** An error answer (or an error event, without a status) as a Failure. */
export function classifyAnswer(args: { status: number | undefined; headers: Headers; body: unknown; text: string; errors: ErrorReading }): Failure {
  const { status, headers } = args;
  const error = args.errors.describe(args.body, args.text);
  const detail = truncate(`${status ?? 'error'} ${error.message || '(no body)'}`);
  const retryAfterMs = parseRetryAfterMs(headers) ?? parseRateLimitResetMs(headers);
  const base = { detail, ...(status !== undefined ? { status } : {}), ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
  const kind = `${error.code ?? ''} ${error.type ?? ''}`;
  const failure: Failure =
    /insufficient_quota|billing/.test(kind) || /exceeded your current quota|insufficient credits|credit balance is too low/i.test(error.message) ? { ...base, code: 'llm_quota_exceeded', retryable: false }
    : args.errors.isContextOverflow(error, status) ? { ...base, code: 'llm_context_exceeded', retryable: false }
    : status === 429 || /rate_limit/.test(kind) ? { ...base, code: 'llm_rate_limited', retryable: true }
    : status === 529 || /overloaded/.test(kind) ? { ...base, code: 'llm_server_error', retryable: true }
    : status === undefined ? { ...base, code: 'llm_server_error', retryable: true }
    : status === 408 ? { ...base, code: 'llm_timeout', retryable: true }
    : status === 409 ? { ...base, code: 'llm_error', retryable: true }
    : status >= 500 ? { ...base, code: 'llm_server_error', retryable: true }
    : status === 401 || status === 403 ? { ...base, code: 'llm_auth_error', retryable: false }
    : status >= 400 ? { ...base, code: 'llm_bad_request', retryable: false }
    : { ...base, code: 'llm_error', retryable: false };
  const shouldRetry = headers.get('x-should-retry');
  if (shouldRetry === 'false') failure.retryable = false;
  if (shouldRetry === 'true' && failure.code !== 'llm_quota_exceeded' && failure.code !== 'llm_context_exceeded') failure.retryable = true;
  return failure;
}

/** Failures that are not an answer: a socket closed, a bad event, something else. */
function classifyThrown(err: unknown): Failure {
  if (err instanceof SyntaxError) return { code: 'llm_server_error', retryable: true, detail: `malformed response: ${truncate(err.message)}` };
  const message = err instanceof Error ? err.message : String(err);
  const code = (err as { cause?: { code?: unknown } } | null)?.cause?.code ?? (err as { code?: unknown } | null)?.code;
  if (err instanceof TypeError || typeof code === 'string') return { code: 'llm_connection_error', retryable: true, detail: `connection failed: ${truncate(message)}` };
  return { code: 'llm_error', retryable: false, detail: truncate(message) };
}

function toLlmError(args: { failure: Failure; attempts: number; settings: LlmSettings; origin: string; textEmitted: boolean }): LlmError {
  const { failure, attempts, settings, textEmitted } = args;
  const tries = attempts > 1 ? ` after ${attempts} attempts` : '';
  const midStream = textEmitted && failure.retryable ? ' (not retried: the response had started streaming)' : '';
  const message = `LLM request to ${args.origin} for model "${settings.model}" failed${tries}: ${failure.detail}${midStream}`;
  return new LlmError(failure.code, redact(message, [settings.api_key]), failure.status, { outputStarted: textEmitted });
}

/** The origin of a URL for messages (never its path, query or user info). */
export function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'the configured base_url';
  }
}

/** What reasoning effort the settings ask for (`reasoning.effort` wins over `reasoning_effort`). */
export function effortOf(settings: LlmSettings): 'low' | 'medium' | 'high' | 'none' | undefined {
  return settings.reasoning?.effort ?? settings.reasoning_effort ?? undefined;
}

/** Whether reasoning from an earlier answer goes back in this request. */
export function sendsReasoningBack(settings: LlmSettings): boolean {
  return settings.reasoning?.send_back !== 'never';
}

export function truncate(text: string, max = 500): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
