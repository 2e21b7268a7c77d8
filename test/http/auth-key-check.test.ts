/**
 * The API key check's contract, tested on the function itself (an HTTP test cannot tell a
 * constant-time comparison from `===`): every configured key is compared, whatever the candidate
 * (no early exit on a match or a length mismatch), each through crypto.timingSafeEqual over
 * fixed-length SHA-256 digests, and only an exact key passes.
 */
import { describe, expect, it, vi } from 'vitest';

vi.mock('node:crypto', async (importOriginal) => {
  const original = await importOriginal<typeof import('node:crypto')>();
  return { ...original, timingSafeEqual: vi.fn((a: NodeJS.ArrayBufferView, b: NodeJS.ArrayBufferView) => original.timingSafeEqual(a, b)) };
});

const { timingSafeEqual } = await import('node:crypto');
const { createKeyChecker } = await import('../../src/http/plugins/auth.js');
const compare = vi.mocked(timingSafeEqual);

const KEYS = ['first-key-0123456789abcdef', 'second-key-fedcba9876543210', 'x'];

describe('createKeyChecker', () => {
  const cases: Array<[what: string, candidate: string, accepted: boolean]> = [
    ['the first key', KEYS[0]!, true],
    ['a later key of the rotation list', KEYS[1]!, true],
    ['a one-character key', 'x', true],
    ['a key of another length', 'short', false],
    ['an empty key', '', false],
    ['a prefix of a key', KEYS[0]!.slice(0, -1), false],
    ['a key with one more character', `${KEYS[0]!}0`, false],
    ['a key differing in its last character', `${KEYS[1]!.slice(0, -1)}1`, false],
    ['a key in another case', KEYS[0]!.toUpperCase(), false],
    ['a key with spaces around it', ` ${KEYS[0]!} `, false],
  ];

  it.each(cases)('%s: accepted %s, after comparing against every key in constant time', (_what, candidate, accepted) => {
    const check = createKeyChecker(KEYS);
    const before = compare.mock.calls.length;
    expect(check(candidate)).toBe(accepted);
    const calls = compare.mock.calls.slice(before);
    expect(calls).toHaveLength(KEYS.length);
    for (const [a, b] of calls) {
      expect([Buffer.byteLength(a as Buffer), Buffer.byteLength(b as Buffer)]).toEqual([32, 32]);
    }
  });

  it('remembers a key it accepted; every other candidate is still compared against every key', () => {
    const check = createKeyChecker(KEYS);
    expect(check(KEYS[0]!)).toBe(true);
    let before = compare.mock.calls.length;
    expect(check(KEYS[0]!)).toBe(true);
    expect(compare.mock.calls.length - before).toBe(0);
    for (const candidate of [`${KEYS[0]!.slice(0, -1)}1`, KEYS[0]!.slice(0, -1), '']) {
      before = compare.mock.calls.length;
      expect(check(candidate)).toBe(false);
      expect(compare.mock.calls.length - before).toBe(KEYS.length);
    }
  });

  it('accepts nothing when no key is configured, and nothing of one key for another list', () => {
    expect(createKeyChecker([])('anything')).toBe(false);
    expect(createKeyChecker(['only-this'])(KEYS[0]!)).toBe(false);
    expect(createKeyChecker(['only-this'])('only-this')).toBe(true);
  });
});
