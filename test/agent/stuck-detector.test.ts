import { describe, expect, it } from 'vitest';
import { StuckDetector, type StuckStep } from '../../src/core/agent/stuck-detector.js';

const step = (action: string, observation: string, extra: Partial<StuckStep> = {}): StuckStep => ({ action, observation, isError: false, ...extra });

function feed(detector: StuckDetector, steps: StuckStep[]): string[] {
  return steps.map((s) => detector.observe(s).kind);
}

describe('StuckDetector', () => {
  it('ignores polls of a live command, however many', () => {
    const detector = new StuckDetector();
    const poll = step('poll', '[Still running after 1 s]', { livePoll: true });
    expect(feed(detector, Array.from({ length: 20 }, () => poll))).toEqual(Array.from({ length: 20 }, () => 'ok'));
  });

  it('nudges on a repeat, starts over, and stops when the loop forms again soon after', () => {
    const detector = new StuckDetector(4);
    const same = step('a', 'x');
    expect(feed(detector, [same, same, same, same])).toEqual(['ok', 'ok', 'ok', 'nudge']);
    expect(feed(detector, [same, same, same, same])).toEqual(['ok', 'ok', 'ok', 'stop']);
  });

  it('nudges again, rather than stopping, when the new loop comes long after the first', () => {
    const detector = new StuckDetector(4);
    const same = step('a', 'x');
    feed(detector, [same, same, same, same]);
    feed(detector, Array.from({ length: 15 }, (_, i) => step(`b${i}`, `y${i}`)));
    expect(feed(detector, [same, same, same, same]).at(-1)).toBe('nudge');
  });

  it('sees error streaks, alternation and identical results from different calls', () => {
    expect(feed(new StuckDetector(), [1, 2, 3].map((i) => step('same', `error ${i}`, { isError: true }))).at(-1)).toBe('nudge');
    expect(feed(new StuckDetector(), [1, 2, 3, 4, 5].map((i) => step(`call ${i}`, 'permission denied', { isError: true }))).at(-1)).toBe('nudge');
    const a = step('a', 'ra');
    const b = step('b', 'rb');
    expect(feed(new StuckDetector(), [a, b, a, b, a, b])).toEqual(['ok', 'ok', 'ok', 'ok', 'ok', 'nudge']);
    expect(feed(new StuckDetector(), [1, 2, 3, 4, 5, 6, 7].map((i) => step(`call ${i}`, 'same text'))).at(-1)).toBe('ok');
    expect(feed(new StuckDetector(), [1, 2, 3, 4, 5, 6, 7, 8].map((i) => step(`call ${i}`, 'same text'))).at(-1)).toBe('nudge');
    expect(feed(new StuckDetector(), [1, 2, 3, 4, 5, 6, 7, 8].map((i) => step(`call ${i}`, '(no output)'))).at(-1)).toBe('ok');
    expect(feed(new StuckDetector(), [1, 2, 3, 4, 5, 6, 7, 8].map((i) => step(`call ${i}`, `result ${i}`))).every((kind) => kind === 'ok')).toBe(true);
  });

  it('judges a reply as a whole: a batch of calls failing alike is not a loop, the same batch again and again is', () => {
    const detector = new StuckDetector();
    const batch = [1, 2, 3, 4, 5, 6, 7].map((i) => step(`read ../outside-${i}`, 'outside the workdir', { isError: true }));
    expect(detector.observeTurn(batch).kind).toBe('ok');
    expect(detector.observeTurn([step('x', 'y'), step('poll', 'running', { livePoll: true })]).kind).toBe('ok');
    expect(detector.observeTurn(batch).kind).toBe('ok');
    expect(detector.observeTurn(batch).kind).toBe('ok');
    expect(detector.observeTurn(batch).kind).toBe('nudge');
    expect(detector.observeTurn([step('poll', 'running', { livePoll: true }), step('poll2', 'running', { livePoll: true })]).kind).toBe('ok');
  });
});
