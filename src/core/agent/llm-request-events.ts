import type { LlmFallback, LlmRequest, LlmRetry, LlmRouting } from './llm.js';

/**
 * What an LLM request reports besides its answer, for any request an agent makes (a run's turn, a
 * subagent's, a condensation's summary): its retries, its moves to a fallback model, and the
 * routing state a `turn` or `sticky` fallback scope reads and writes.
 */
export interface LlmRequestEvents {
  /** A retry or a move to a fallback model (recorded as events: the request waits for them before its usage). */
  onLlmRetry?: (retry: LlmRetry) => void | Promise<unknown>;
  onLlmFallback?: (fallback: LlmFallback) => void | Promise<unknown>;
  /** The run's routing state (which fallback a `turn` or `sticky` scope stays on). */
  routing?: LlmRouting;
}

/**
 * The hooks one request is made with, and `written()`, which waits for the events they started:
 * awaited before the request's usage is recorded, so the log has them in the order they came.
 * `turn`: the history's last user message, which ends a `turn` scope's stay on a fallback.
 */
export function requestHooks(events: LlmRequestEvents, turn: number): { hooks: Pick<LlmRequest, 'onRetry' | 'onFallback' | 'routing'>; written(): Promise<unknown> } {
  const recorded: Promise<unknown>[] = [];
  const record = (result: void | Promise<unknown>) => void (result && recorded.push(result));
  const { onLlmRetry, onLlmFallback, routing } = events;
  if (routing) routing.turn = turn;
  return {
    hooks: {
      ...(onLlmRetry && { onRetry: (retry: LlmRetry) => record(onLlmRetry(retry)) }),
      ...(onLlmFallback && { onFallback: (fallback: LlmFallback) => record(onLlmFallback(fallback)) }),
      ...(routing && { routing }),
    },
    written: () => Promise.all(recorded),
  };
}
