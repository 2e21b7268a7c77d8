/**
 * The streaming masker against the whole-text masker, over every way a text can be cut: every
 * split position into two and three pieces, one character at a time, and random many-piece
 * cuts, with secrets that are prefixes of one another. The generator is seeded, so a failure
 * names a case that replays.
 */
import { describe, expect, it } from 'vitest';
import { SecretMasker } from '../../src/core/secrets/secret-masker.js';
import { StreamingMasker } from '../../src/core/secrets/streaming-masker.js';

/** A small seeded generator (mulberry32): the same seed gives the same cases. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Case {
  secrets: { BASE: string; LONGER: string; LONGEST: string; OTHER: string };
  text: string;
}

/**
 * Secrets that are prefixes of each other (a base value, then longer ones that start with it), one
 * unrelated, and a text that mixes them with filler and with near misses: a secret's beginning
 * followed by something else, which the stream must hold back and then let go unmasked.
 */
function makeCase(seed: number): Case {
  const next = random(seed);
  const pick = (alphabet: string, length: number) => Array.from({ length }, () => alphabet[Math.floor(next() * alphabet.length)]).join('');
  const base = `k${pick('ab', 3)}`;
  const longer = base + pick('ab', 1 + Math.floor(next() * 3));
  const longest = longer + pick('ab', 1 + Math.floor(next() * 3));
  const other = pick('abxy', 4 + Math.floor(next() * 3));
  const secrets = { BASE: base, LONGER: longer, LONGEST: longest, OTHER: other };
  const values = Object.values(secrets);
  const parts: string[] = [];
  for (let i = 0; i < 6; i++) {
    const roll = next();
    const value = values[Math.floor(next() * values.length)]!;
    if (roll < 0.45) parts.push(value);
    else if (roll < 0.7) parts.push(value.slice(0, 1 + Math.floor(next() * (value.length - 1))) + pick('-z ', 1));
    else parts.push(pick('abkxyz -', 1 + Math.floor(next() * 4)));
  }
  return { secrets, text: parts.join('') };
}

/** The text streamed in these pieces, then flushed; also each piece as it went out. */
function stream(masker: SecretMasker, pieces: string[]): { whole: string; out: string[] } {
  const streaming = new StreamingMasker(masker);
  const out = pieces.map((piece) => streaming.push(piece));
  out.push(streaming.flush());
  return { whole: out.join(''), out };
}

/** Fails naming the case, the cut and what went out. */
function check(testCase: Case, masker: SecretMasker, pieces: string[]): void {
  const expected = masker.maskText(testCase.text);
  const { whole, out } = stream(masker, pieces);
  if (whole === expected) return;
  expect({ secrets: testCase.secrets, pieces, out, whole }).toEqual({ secrets: testCase.secrets, pieces, out, whole: expected });
}

const SEEDS = Array.from({ length: 40 }, (_, i) => 1000 + i);

describe('StreamingMasker: the same output as masking the whole text, however it is cut', () => {
  it('the generator makes texts that hold prefixes of one another, whole and cut short', () => {
    // Guards the property tests below against a generator that stopped producing what they are about.
    let wholeLongest = 0;
    let nearMisses = 0;
    for (const seed of SEEDS) {
      const { secrets, text } = makeCase(seed);
      expect(secrets.LONGER.startsWith(secrets.BASE) && secrets.LONGEST.startsWith(secrets.LONGER)).toBe(true);
      if (text.includes(secrets.LONGEST)) wholeLongest++;
      if (new SecretMasker(secrets).maskText(text).includes(secrets.BASE.slice(0, 2))) nearMisses++;
    }
    expect(wholeLongest).toBeGreaterThan(5);
    expect(nearMisses).toBeGreaterThan(5);
  });

  it('every split position into two pieces', () => {
    for (const seed of SEEDS) {
      const testCase = makeCase(seed);
      const masker = new SecretMasker(testCase.secrets);
      const { text } = testCase;
      for (let at = 0; at <= text.length; at++) check(testCase, masker, [text.slice(0, at), text.slice(at)]);
    }
  });

  it('every pair of split positions into three pieces', () => {
    for (const seed of SEEDS) {
      const testCase = makeCase(seed);
      const masker = new SecretMasker(testCase.secrets);
      const { text } = testCase;
      for (let first = 0; first <= text.length; first++) {
        for (let second = first; second <= text.length; second++) check(testCase, masker, [text.slice(0, first), text.slice(first, second), text.slice(second)]);
      }
    }
  });

  it('one character at a time, and many random cuts (empty pieces included)', () => {
    for (const seed of SEEDS) {
      const testCase = makeCase(seed);
      const masker = new SecretMasker(testCase.secrets);
      const { text } = testCase;
      check(testCase, masker, [...text]);
      const next = random(seed * 7 + 1);
      for (let round = 0; round < 50; round++) {
        const pieces: string[] = [];
        for (let at = 0; at < text.length; ) {
          const size = Math.floor(next() * 4);
          pieces.push(text.slice(at, at + size));
          at += size;
        }
        check(testCase, masker, pieces);
      }
    }
  });

  it('never lets a piece of a secret out before the stream knows it is not one', () => {
    // A secret's value arrives a character at a time: none of its characters go out unmasked.
    const secrets = { BASE: 'kaab', LONGER: 'kaabab', LONGEST: 'kaababba' };
    const masker = new SecretMasker(secrets);
    const raw = (piece: string) => piece.replace(/<secret:[A-Z]+>/g, '').replace(/[x ]/g, '');
    for (const value of Object.values(secrets)) {
      const { out } = stream(masker, [...`x ${value}`]);
      expect(out.map(raw), value).toEqual(out.map(() => ''));
      expect(out.join('')).toBe(masker.maskText(`x ${value}`));
    }
    // A value that a longer one starts with is held back until the stream ends: it could still grow.
    const { out } = stream(masker, [...'x kaabab']);
    expect(out.at(-1)).toBe('<secret:LONGER>');
  });
});
