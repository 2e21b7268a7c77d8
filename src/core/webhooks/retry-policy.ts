/** How failed deliveries are retried. */
export interface RetryPolicy {
  /** Delay before the first retry; doubles on each further failure. */
  baseMs: number;
  /** The delay never grows past this. */
  maxMs: number;
  /** Retries go on for at least this long after the first attempt, then the subscription is marked failing. */
  windowMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { baseMs: 1_000, maxMs: 10 * 60_000, windowMs: 24 * 60 * 60_000 };

/**
 * The wait before retry number `retry` (1, 2, 3…): exponential, capped, with "equal jitter" (between
 * half and all of the exponential delay) so that receivers coming back are not hit all at once.
 */
export function retryDelayMs(options: { retry: number; policy: RetryPolicy; random: () => number }): number {
  const { retry, policy, random } = options;
  const exponential = Math.min(policy.maxMs, policy.baseMs * 2 ** Math.min(Math.max(retry - 1, 0), 40));
  return Math.round(exponential / 2 + random() * (exponential / 2));
}

/** Whether the retry window of an event is over: retries stop only once it has fully elapsed. */
export function retryWindowOver(options: { windowStartedMs: number; nowMs: number; policy: RetryPolicy }): boolean {
  return options.nowMs - options.windowStartedMs >= options.policy.windowMs;
}
