/**
 * An LLM attempt's idle limit (AttemptController): every streamed chunk restarts it, so a stream
 * that keeps making progress is never cut by it however long it lasts in all (the total limit
 * does that), and one that stops is cut `idleMs` after its last chunk. Driven on fake timers.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AttemptController } from '../../src/adapters/llm/llm-retry.js';

beforeEach(() => {
  vi.useFakeTimers();
});

afterEach(() => {
  vi.useRealTimers();
});

describe('AttemptController', () => {
  it('restarts the idle limit at each chunk and expires idleMs after the last one', () => {
    const attempt = new AttemptController(new AbortController().signal, { idleMs: 100, totalMs: 10_000 });
    for (let i = 0; i < 20; i++) {
      vi.advanceTimersByTime(90);
      attempt.touch();
    }
    // 1.8 s of a stream with a chunk every 90 ms: alive.
    expect(attempt.signal.aborted).toBe(false);
    vi.advanceTimersByTime(99);
    expect(attempt.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(attempt.signal.aborted).toBe(true);
    expect(attempt.timedOut).toBe('idle');
    attempt.dispose();
  });

  it('still ends at the total limit while chunks keep coming, and not after dispose', () => {
    const attempt = new AttemptController(new AbortController().signal, { idleMs: 100, totalMs: 500 });
    for (let i = 0; i < 6; i++) {
      vi.advanceTimersByTime(90);
      attempt.touch();
    }
    expect(attempt.timedOut).toBe('total');
    const disposed = new AttemptController(new AbortController().signal, { idleMs: 100, totalMs: 500 });
    disposed.touch();
    disposed.dispose();
    vi.advanceTimersByTime(1_000);
    expect(disposed.signal.aborted).toBe(false);
  });
});
