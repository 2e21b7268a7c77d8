/**
 * The fallback router: an LlmClient around the one that speaks the protocols. A request goes to
 * the primary model, and when it fails with a reason of `llm.fallback_on` (after the inner
 * client's own retries, `llm.retry`), to each of `llm.fallbacks` in turn, the settings rewritten
 * for it (model, base_url, api_key, api) and the history made acceptable to it
 * (history-for-target.ts). A model that failed so is skipped by every conversation for
 * `cooldown_s` (ModelCooldowns). Never moves on an authentication, billing or invalid request,
 * nor once the answer had started streaming: that request is asked again of the same model.
 */
import { LlmError, withRequestChanges, type LlmClient, type LlmMessageCodec, type LlmRequest, type LlmResponse, type LlmSettings } from '../../core/agent/llm.js';
import { DEFAULT_FALLBACK_ON, type FallbackReason } from '../../core/schemas/llm-config.js';
import { failureReasonOf, retryReasonOf } from './failure-reason.js';
import { historyForTarget, type LlmOrigin } from './history-for-target.js';
import { isAbortError } from './llm-retry.js';
import { ModelCooldowns } from './model-cooldowns.js';

const DEFAULT_COOLDOWN_S = 60;
/** Failures that may pass when asked again. */
const TRANSIENT = new Set<FallbackReason>(['overloaded', 'unavailable', 'timeout', 'server_error', 'rate_limited']);
/** Default asks of one model for an answer that broke off mid-stream (when `retry.max_attempts` is not set). */
const DEFAULT_STREAM_RETRIES = 2;

/** One failed attempt, as `agent_error`'s `details.attempts[]` shows it (no key, no body). */
export interface FallbackAttempt {
  model: string;
  /** The failure class, or `cooldown` for a model skipped while it cooled down. */
  reason: string;
  code?: string;
  status?: number;
  message: string;
}

interface Candidate {
  settings: LlmSettings;
  key: string;
  origin: LlmOrigin;
}

export class FallbackLlmClient implements LlmClient {
  readonly codec: LlmMessageCodec | undefined;

  constructor(
    private readonly inner: LlmClient,
    private readonly cooldowns: ModelCooldowns = new ModelCooldowns(),
  ) {
    this.codec = inner.codec;
  }

  supportsJsonSchema(settings: LlmSettings): boolean {
    return this.inner.supportsJsonSchema?.(settings) ?? false;
  }

  async complete(request: LlmRequest): Promise<LlmResponse> {
    const { settings } = request;
    const candidates = candidatesOf(settings);
    if (candidates.length === 1) return this.askOne(request, { candidate: candidates[0]!, primary: candidates[0]!, index: 0 });
    const fallbackOn = new Set<FallbackReason>(settings.fallback_on ?? DEFAULT_FALLBACK_ON);
    const cooldownS = settings.cooldown_s ?? DEFAULT_COOLDOWN_S;
    const attempts: FallbackAttempt[] = [];
    let index = this.startIndex(request, candidates.length);
    // Models cooling down are skipped while another is left; when all are, they are tried anyway.
    const anyReady = candidates.slice(index).some((candidate) => !this.cooldowns.cooling(candidate.key));
    let from: Candidate | null = null;
    let reason = '';
    for (; index < candidates.length; index++) {
      const candidate = candidates[index]!;
      if (anyReady && this.cooldowns.cooling(candidate.key) && candidates.slice(index + 1).some((next) => !this.cooldowns.cooling(next.key))) {
        attempts.push({ model: candidate.settings.model, reason: 'cooldown', message: `skipped: it failed within the last ${cooldownS} s` });
        from ??= candidate;
        reason = 'cooldown';
        continue;
      }
      if (from) request.onFallback?.({ fromModel: from.settings.model, toModel: candidate.settings.model, reason, attempt: attempts.length });
      try {
        const response = await this.askOne(request, { candidate, primary: candidates[0]!, index });
        this.cooldowns.recover(candidate.key);
        this.remember(request, index, settings);
        return index === 0 ? response : { ...response, model: candidate.settings.model };
      } catch (error) {
        if (!(error instanceof LlmError) || isAbortError(error) || request.signal.aborted) throw error;
        const failure = failureReasonOf(error);
        attempts.push({ model: candidate.settings.model, reason: failure ?? retryReasonOf(error), code: error.code, ...(error.status !== undefined ? { status: error.status } : {}), message: error.message });
        // An answer that had begun streaming is never finished by another model.
        if (failure === null || !fallbackOn.has(failure) || error.more.outputStarted) {
          if (attempts.length === 1) throw error;
          throw unavailable(attempts, error);
        }
        this.cooldowns.fail(candidate.key, cooldownS);
        from = candidate;
        reason = failure;
      }
    }
    throw unavailable(attempts);
  }

  /** One model, asked again while its answer breaks off mid-stream (the turn is retried, not moved). */
  private async askOne(request: LlmRequest, args: { candidate: Candidate; primary: Candidate; index: number }): Promise<LlmResponse> {
    const { candidate, primary, index } = args;
    const maxAsks = request.settings.retry?.max_attempts ?? DEFAULT_STREAM_RETRIES + 1;
    const onRetry = request.onRetry;
    const model = candidate.settings.model;
    const changes: Partial<LlmRequest> = {
      settings: candidate.settings,
      ...(onRetry ? { onRetry: (retry) => onRetry({ ...retry, model, reason: retry.reason ?? retryReasonOf({ code: retry.code, ...(retry.status !== undefined ? { status: retry.status } : {}), message: retry.message }) }) } : {}),
    };
    // A fallback gets the history converted for it, as objects (the kept texts are the primary's wire form).
    const attempt = index === 0 ? withRequestChanges(request, changes) : withRequestChanges(request, { ...changes, messages: historyForTarget(request.messages, { target: candidate.origin, assumedOrigin: primary.origin }), encoded: undefined });
    for (let ask = 1; ; ask++) {
      try {
        return await this.inner.complete(attempt);
      } catch (error) {
        // Only a transient failure is worth asking again (a content filter that cut the answer is not).
        const transient = TRANSIENT.has(failureReasonOf(error as LlmError) ?? 'content_filtered');
        if (!(error instanceof LlmError) || !error.more.outputStarted || !transient || ask >= maxAsks || request.signal.aborted) throw error;
        onRetry?.({ attempt: ask, model, reason: 'stream_interrupted', code: error.code, ...(error.status !== undefined ? { status: error.status } : {}), message: error.message, delayMs: 0 });
      }
    }
  }

  /** Where the request starts: the primary, or the fallback a `turn` or `sticky` scope stays on. */
  private startIndex(request: LlmRequest, count: number): number {
    const scope = request.settings.fallback_scope ?? 'call';
    const stay = request.routing?.stay;
    if (scope === 'call' || !stay || stay.index >= count) return 0;
    if (scope === 'turn' && stay.turn !== request.routing!.turn) return 0;
    return stay.index;
  }

  private remember(request: LlmRequest, index: number, settings: LlmSettings): void {
    const routing = request.routing;
    if (!routing || (settings.fallback_scope ?? 'call') === 'call') return;
    if (index === 0) delete routing.stay;
    else routing.stay = { index, turn: routing.turn };
  }
}

/** `[primary, ...fallbacks]` as settings: a fallback without base_url uses the primary's endpoint and key; one with its own base_url only its own key. */
function candidatesOf(settings: LlmSettings): Candidate[] {
  const all: LlmSettings[] = [settings];
  for (const fallback of settings.fallbacks ?? []) {
    const ownEndpoint = fallback.base_url !== undefined && fallback.base_url !== settings.base_url;
    all.push({
      ...settings,
      model: fallback.model,
      base_url: fallback.base_url ?? settings.base_url ?? null,
      api_key: fallback.api_key ?? (ownEndpoint ? null : (settings.api_key ?? null)),
      api: fallback.api ?? (ownEndpoint ? null : (settings.api ?? null)),
      fallbacks: null,
    });
  }
  return all.map((candidate) => {
    const origin: LlmOrigin = { api: candidate.api ?? 'chat', model: candidate.model, ...(candidate.base_url ? { baseUrl: candidate.base_url } : {}) };
    return { settings: candidate, origin, key: `${origin.api}\u0000${origin.baseUrl ?? ''}\u0000${origin.model}` };
  });
}

function unavailable(attempts: FallbackAttempt[], last?: LlmError): LlmError {
  const tried = attempts.map((attempt) => `${attempt.model} (${attempt.reason})`).join(', ');
  const why = last ? ` The last one cannot be retried elsewhere: ${last.message}` : '';
  return new LlmError('llm_unavailable', `No model could answer: ${tried}.${why}`, last?.status, { details: { attempts } });
}
