/**
 * Issue 22, items 1, 4, 6 and 7: provider errors agentd must tell apart (context overflow,
 * quota, rate limits with reset headers, Gemini's array-wrapped errors) and how long it waits.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { OpenAiLlmClient } from '../../src/adapters/llm/openai-llm.js';
import { LlmError, type LlmRequest, type LlmRetry } from '../../src/core/agent/llm.js';
import { startFakeLlm, type FakeLlm, type FakeTurn } from '../fake-llm/fake-llm-server.js';
import { PROVIDER_ERRORS } from '../fake-llm/provider-errors.js';
import { recordedBody } from '../fake-llm/recordings.js';
import { parseRetryHintMs } from '../../src/adapters/llm/llm-retry.js';

let fake: FakeLlm | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

function request(server: FakeLlm, retries: LlmRetry[] = [], settings: Partial<LlmRequest['settings']> = {}): LlmRequest {
  return {
    messages: [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'hi' }],
    tools: [],
    signal: new AbortController().signal,
    onRetry: (retry) => retries.push(retry),
    settings: { model: 'fake-model', base_url: server.url, api_key: 'k', num_retries: 2, timeout_s: 10, ...settings },
  };
}

async function failWith(script: FakeTurn[], client = new OpenAiLlmClient({ retryBaseDelayMs: 5, retryMaxDelayMs: 20, rateLimitWaitMs: 0 })): Promise<{ error: LlmError; requests: number; retries: LlmRetry[] }> {
  fake = await startFakeLlm(script);
  const retries: LlmRetry[] = [];
  const error = await client.complete(request(fake, retries)).then(
    () => expect.fail('expected a failure'),
    (caught: unknown) => caught as LlmError,
  );
  expect(error).toBeInstanceOf(LlmError);
  return { error, requests: fake.requests.length, retries };
}

describe('context overflow', () => {
  for (const [provider, profile] of Object.entries(PROVIDER_ERRORS)) {
    if (!('contextOverflow' in profile)) continue;
    it(`is llm_context_exceeded for ${provider}, not retried, with the provider's words`, async () => {
      const { error, requests } = await failWith([profile.contextOverflow, { text: 'never' }]);
      expect(error.code).toBe('llm_context_exceeded');
      expect(requests).toBe(1);
      expect(error.message).toMatch(/context length|too long|exceeds the maximum/);
    });
  }
});

describe('context overflow by code', () => {
  it('is recognised by its code where the wording says nothing of a context', async () => {
    const { error, requests } = await failWith([{ status: 400, body: { error: { message: 'Input is over the limit for this model.', type: 'invalid_request_error', code: 'context_window_exceeded' } } }, { text: 'never' }]);
    expect(error.code).toBe('llm_context_exceeded');
    expect(requests).toBe(1);
  });
});

describe('Gemini', () => {
  it('has its array-wrapped error read, not "no body"', async () => {
    const { error } = await failWith([PROVIDER_ERRORS.gemini.badRequest]);
    expect(error.code).toBe('llm_bad_request');
    expect(error.message).toContain('INVALID_ARGUMENT: Invalid JSON payload received. Unknown name "exclusiveMinimum"');
    expect(error.message).not.toContain('no body');
  });
});

describe('rate limits', () => {
  it('never retries insufficient_quota', async () => {
    const { error, requests } = await failWith([PROVIDER_ERRORS.openai.insufficientQuota, { text: 'never' }]);
    expect(error.code).toBe('llm_quota_exceeded');
    expect(requests).toBe(1);
  });

  it('waits as long as x-ratelimit-reset-* says when there is no retry-after', async () => {
    fake = await startFakeLlm([PROVIDER_ERRORS.openai.rateLimitedWithReset, { text: 'after the reset' }]);
    const retries: LlmRetry[] = [];
    const answer = await new OpenAiLlmClient({ retryBaseDelayMs: 5, retryMaxDelayMs: 20 }).complete(request(fake, retries));
    expect(answer.content).toBe('after the reset');
    expect(retries.map((retry) => retry.delayMs)).toEqual([150]);
  });

  it('keeps retrying 429s past num_retries until the wait budget is spent, then fails', async () => {
    const limited = { status: 429, body: { error: { message: 'Rate limit reached', type: 'requests', code: 'rate_limit_exceeded' } } };
    const client = new OpenAiLlmClient({ retryBaseDelayMs: 20, retryMaxDelayMs: 40, rateLimitWaitMs: 300, random: () => 0.5 });
    const { error, requests, retries } = await failWith(Array.from({ length: 40 }, () => limited), client);
    expect(error.code).toBe('llm_rate_limited');
    expect(requests).toBeGreaterThan(3); // num_retries is 2: three attempts without the budget
    const waited = retries.reduce((sum, retry) => sum + retry.delayMs, 0);
    expect(waited).toBeGreaterThanOrEqual(300);
    expect(waited - (retries.at(-1)?.delayMs ?? 0)).toBeLessThan(300);
  });

  it("Gemini's 429 with RetryInfo (recorded) is a rate limit waited out, though its message speaks of a quota", async () => {
    const body = recordedBody('gemini-429-retry-info') as { error: unknown };
    expect(parseRetryHintMs(body.error)).toBe(58_000);
    // As Gemini's native API sends it, and wrapped in an array as its OpenAI-compatible endpoint does.
    for (const shape of [body, [body]]) {
      await fake?.close();
      fake = await startFakeLlm([{ status: 429, body: shape }, { text: 'after the wait' }]);
      const retries: LlmRetry[] = [];
      // The hint is capped by maxRetryAfterMs: the test does not wait 58 s.
      const answer = await new OpenAiLlmClient({ retryBaseDelayMs: 5, retryMaxDelayMs: 20, maxRetryAfterMs: 30 }).complete(request(fake, retries));
      expect(answer.content).toBe('after the wait');
      expect(retries.map((retry) => [retry.code, retry.delayMs])).toEqual([['llm_rate_limited', 30]]);
    }
  });

  it('reads retry_after_ms from the error body', async () => {
    fake = await startFakeLlm([{ status: 429, body: { error: { message: 'Too many requests', type: 'rate_limit', retry_after_ms: 40 } } }, { text: 'ok' }]);
    const retries: LlmRetry[] = [];
    await new OpenAiLlmClient({ retryBaseDelayMs: 5, retryMaxDelayMs: 20 }).complete(request(fake, retries));
    expect(retries.map((retry) => retry.delayMs)).toEqual([40]);
  });

  it('still gives up on other retryable errors after num_retries', async () => {
    const { error, requests } = await failWith(Array.from({ length: 10 }, () => ({ status: 503 })), new OpenAiLlmClient({ retryBaseDelayMs: 5, retryMaxDelayMs: 20, rateLimitWaitMs: 60_000 }));
    expect(error.code).toBe('llm_server_error');
    expect(requests).toBe(3);
  });
});

describe('timeouts', () => {
  it('a silent stream is cut after the idle timeout, told apart from the overall timeout', async () => {
    fake = await startFakeLlm([{ text: 'a long answer that stalls', hangAfterChunks: 2 }]);
    const client = new OpenAiLlmClient({ retryBaseDelayMs: 5, retryMaxDelayMs: 20, idleTimeoutMs: 200 });
    const error = await client.complete(request(fake, [], { num_retries: 0, timeout_s: 30 })).then(
      () => expect.fail('expected a timeout'),
      (caught: unknown) => caught as LlmError,
    );
    expect(error.code).toBe('llm_timeout');
    expect(error.message).toContain('no data from the server for 0.2 s (AGENTD_LLM_IDLE_TIMEOUT_S)');
  });

  it('a stream that keeps trickling is cut at timeout_s in all', async () => {
    fake = await startFakeLlm([{ text: 'x'.repeat(400), chunkDelayMs: 60 }]);
    const client = new OpenAiLlmClient({ retryBaseDelayMs: 5, retryMaxDelayMs: 20, idleTimeoutMs: 1000 });
    const error = await client.complete(request(fake, [], { num_retries: 0, timeout_s: 0.5 })).then(
      () => expect.fail('expected a timeout'),
      (caught: unknown) => caught as LlmError,
    );
    expect(error.code).toBe('llm_timeout');
    expect(error.message).toContain('took longer than 0.5 s (timeout_s)');
  });
});
