/**
 * Vendor-free retry plumbing for the LLM adapter: backoff with jitter, `retry-after` parsing,
 * the retry policy of a model's settings, an abortable sleep and the abort error the agent loop
 * recognises.
 */
import type { LlmSettings } from '../../core/agent/llm.js';

/** The error an LLM call ends with when its signal is aborted (name `AbortError`, like fetch's). */
export class LlmAbortError extends Error {
  constructor(reason?: unknown) {
    super('The LLM request was aborted', reason === undefined ? undefined : { cause: reason });
    this.name = 'AbortError';
  }
}

/** True for any abort-shaped error: ours, fetch/undici's, DOMException('AbortError'). */
export function isAbortError(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { name?: unknown }).name === 'AbortError';
}

export interface BackoffOptions {
  /** 0 for the first retry. */
  attempt: number;
  baseDelayMs: number;
  maxDelayMs: number;
  /** Source of randomness in [0, 1), injectable for tests. */
  random?: () => number;
}

/** Exponential backoff with "equal jitter": half of the step is fixed, half is random. */
export function backoffDelayMs({ attempt, baseDelayMs, maxDelayMs, random = Math.random }: BackoffOptions): number {
  const step = Math.min(maxDelayMs, baseDelayMs * 2 ** attempt);
  return Math.round(step / 2 + random() * (step / 2));
}

/**
 * Milliseconds a server asked us to wait: `retry-after-ms` (OpenAI), else `retry-after` as
 * seconds or an HTTP date. Undefined when absent or unparsable.
 */
export function parseRetryAfterMs(headers: { get(name: string): string | null } | undefined, now = Date.now()): number | undefined {
  if (!headers) return undefined;
  const ms = Number.parseFloat(headers.get('retry-after-ms') ?? '');
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const raw = headers.get('retry-after');
  if (raw === null || raw.trim() === '') return undefined;
  const seconds = Number(raw);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(raw);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/**
 * Milliseconds an error body asks to wait: Google's `RetryInfo` detail (`"retryDelay": "58s"`,
 * Gemini's 429 for a per-minute quota), `retry_after_ms`, or `retry_after` in seconds (as some
 * gateways put them in the error object). Undefined when the body has none.
 */
export function parseRetryHintMs(error: unknown): number | undefined {
  if (!error || typeof error !== 'object') return undefined;
  const record = error as { details?: unknown; retry_after_ms?: unknown; retry_after?: unknown; metadata?: unknown };
  if (Array.isArray(record.details)) {
    for (const detail of record.details) {
      const info = detail as { '@type'?: unknown; retryDelay?: unknown } | null;
      if (typeof info?.['@type'] !== 'string' || !info['@type'].endsWith('google.rpc.RetryInfo')) continue;
      const delay = typeof info.retryDelay === 'string' ? /^(\d+(?:\.\d+)?)s$/.exec(info.retryDelay.trim()) : null;
      if (delay) return Math.round(Number(delay[1]) * 1000);
    }
  }
  const ms = Number(record.retry_after_ms);
  if (record.retry_after_ms !== undefined && record.retry_after_ms !== null && Number.isFinite(ms) && ms >= 0) return ms;
  const seconds = Number(record.retry_after);
  if (record.retry_after !== undefined && record.retry_after !== null && Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  return record.metadata && typeof record.metadata === 'object' && record.metadata !== error ? parseRetryHintMs(record.metadata) : undefined;
}

/**
 * OpenAI's `x-ratelimit-reset-requests` / `x-ratelimit-reset-tokens` ("1s", "6m0s", "20ms",
 * "1h2m3.5s"): the longer of the two, when a 429 carries no retry-after.
 */
export function parseRateLimitResetMs(headers: { get(name: string): string | null } | undefined): number | undefined {
  if (!headers) return undefined;
  let longest: number | undefined;
  for (const name of ['x-ratelimit-reset-requests', 'x-ratelimit-reset-tokens']) {
    const ms = parseGoDuration(headers.get(name));
    if (ms !== undefined) longest = Math.max(longest ?? 0, ms);
  }
  return longest;
}

function parseGoDuration(raw: string | null): number | undefined {
  if (!raw) return undefined;
  const text = raw.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text) * 1000; // plain seconds
  const units: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1 };
  let total = 0;
  let rest = text;
  while (rest !== '') {
    const match = /^(\d+(?:\.\d+)?)(ms|h|m|s)/.exec(rest);
    if (!match) return undefined;
    total += Number(match[1]) * (units[match[2] as string] as number);
    rest = rest.slice(match[0].length);
  }
  return total;
}

/** Resolves after `ms`, or rejects with LlmAbortError as soon as `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(new LlmAbortError(signal.reason));
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new LlmAbortError(signal.reason));
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * An AbortController for one attempt: aborted when the caller's signal aborts, or when no
 * progress was seen for `idleMs` (call `touch()` on progress). `timedOut` tells the two apart.
 */
export class AttemptController {
  readonly controller = new AbortController();
  /** Which limit ended the attempt: no chunk for `idleMs`, or `totalMs` in all. */
  timedOut: false | 'idle' | 'total' = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly deadline: NodeJS.Timeout;
  private readonly onParentAbort = (): void => this.controller.abort(this.parent.reason);
  private readonly idleMs: number;

  constructor(
    private readonly parent: AbortSignal,
    limits: { idleMs: number; totalMs: number },
  ) {
    this.idleMs = limits.idleMs;
    if (parent.aborted) this.controller.abort(parent.reason);
    else parent.addEventListener('abort', this.onParentAbort, { once: true });
    this.deadline = setTimeout(() => this.expire('total'), limits.totalMs);
    this.touch();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Restart the idle timer (a chunk arrived): the same timer re-armed, not a new one per chunk. */
  touch(): void {
    if (this.timer) this.timer.refresh();
    else this.timer = setTimeout(() => this.expire('idle'), this.idleMs);
  }

  private expire(which: 'idle' | 'total'): void {
    if (this.timedOut) return;
    this.timedOut = which;
    this.controller.abort(new Error('LLM request timed out'));
  }

  dispose(): void {
    clearTimeout(this.timer);
    clearTimeout(this.deadline);
    this.parent.removeEventListener('abort', this.onParentAbort);
  }
}

/** Replaces every occurrence of each secret with `***`; also strips userinfo from URLs. */
export function redact(text: string, secrets: ReadonlyArray<string | null | undefined>): string {
  let out = text.replace(/(\bhttps?:\/\/)[^/\s@]+@/gi, '$1***@');
  for (const secret of secrets) {
    if (secret && secret.length >= 4) out = out.split(secret).join('***');
  }
  return out;
}

/** The client defaults a retry policy falls back on when the settings say nothing. */
export interface RetryDefaults {
  /** First backoff step (default 1000 ms). */
  retryBaseDelayMs?: number;
  /** Cap of one backoff step (default 30 s). */
  retryMaxDelayMs?: number;
  /** Used when `settings.num_retries` is not set (default 4). */
  defaultNumRetries?: number;
  /** 429s are retried, past `num_retries`, until this much time was spent waiting (default 60 s). */
  rateLimitWaitMs?: number;
}

export interface RetryPolicy {
  retries: number;
  baseDelayMs: number;
  maxDelayMs: number;
  honorRetryAfter: boolean;
  rateLimitWaitMs: number;
}

/**
 * How one model is retried, by every protocol's client: `llm.retry` when set (its
 * `max_attempts` is then a hard bound, rate limits included, so a fallback can take over), else
 * `num_retries` and the client's defaults.
 */
export function retryPolicyOf(settings: LlmSettings, defaults: RetryDefaults): RetryPolicy {
  const retry = settings.retry ?? {};
  const retries = retry.max_attempts !== undefined ? retry.max_attempts - 1 : Math.max(0, Math.floor(settings.num_retries ?? defaults.defaultNumRetries ?? 4));
  const baseDelayMs = retry.min_wait_s !== undefined ? retry.min_wait_s * 1000 : (defaults.retryBaseDelayMs ?? 1000);
  const maxDelayMs = Math.max(baseDelayMs, retry.max_wait_s !== undefined ? retry.max_wait_s * 1000 : (defaults.retryMaxDelayMs ?? 30_000));
  return { retries, baseDelayMs, maxDelayMs, honorRetryAfter: retry.honor_retry_after ?? true, rateLimitWaitMs: retry.max_attempts !== undefined ? 0 : (defaults.rateLimitWaitMs ?? 60_000) };
}
