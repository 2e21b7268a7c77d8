import { describe, expect, it, vi } from 'vitest';
import { SecretMasker } from '../../src/core/secrets/secret-masker.js';
import { turnsDuring } from '../support/event-loop-turns.js';

/** The obvious implementation, as a reference: one regex alternation, longest values first. */
function reference(secrets: Record<string, string>, text: string): string {
  const entries = Object.entries(secrets).filter(([, value]) => value.length >= 4).sort((a, b) => b[1].length - a[1].length);
  if (entries.length === 0) return text;
  const names = new Map(entries.map(([name, value]) => [value, name]));
  const pattern = new RegExp(entries.map(([, value]) => value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g');
  return text.replace(pattern, (value) => `<secret:${names.get(value)}>`);
}

describe('SecretMasker', () => {
  it('masks whole values, longest first, adjacent and at the edges', () => {
    const masker = new SecretMasker({ A: 'abcd', B: 'abcdef', C: 'xyz1', SHORT: 'ab' });
    expect(masker.maskText('abcdef')).toBe('<secret:B>');
    expect(masker.maskText('abcdabcd')).toBe('<secret:A><secret:A>');
    expect(masker.maskText('--abcde--xyz1')).toBe('--<secret:A>e--<secret:C>');
    expect(masker.maskText('ab ab abc')).toBe('ab ab abc');
    expect(masker.maskText('')).toBe('');
    expect(masker.maskValue({ list: ['xyz1', 1, null], nested: { text: 'key=abcdef' } })).toEqual({ list: ['<secret:C>', 1, null], nested: { text: 'key=<secret:B>' } });
  });

  it('agrees with a regex reference on random texts', () => {
    const alphabet = 'ab1-é✓';
    const random = (length: number) => Array.from({ length }, () => alphabet[Math.floor(Math.random() * alphabet.length)]).join('');
    for (let round = 0; round < 300; round++) {
      const secrets: Record<string, string> = {};
      for (let i = 0; i < 1 + Math.floor(Math.random() * 6); i++) secrets[`S${i}`] = random(2 + Math.floor(Math.random() * 6));
      const masker = new SecretMasker(secrets);
      for (let i = 0; i < 20; i++) {
        const text = random(Math.floor(Math.random() * 60));
        expect(masker.maskText(text), JSON.stringify({ secrets, text })).toBe(reference(secrets, text));
      }
    }
  });

  it('handles thousands of secrets', () => {
    const secrets: Record<string, string> = {};
    for (let i = 0; i < 10_000; i++) secrets[`S${i}`] = `secret-value-${i}-${(i * 7919) % 10007}`;
    const masker = new SecretMasker(secrets);
    expect(masker.maskText(`log line with ${secrets.S4242} inside`)).toBe('log line with <secret:S4242> inside');
    expect(masker.maskText('a log line with nothing to hide')).toBe('a log line with nothing to hide');
  });

  it('built a slice at a time, masks as one built at once, with the event loop turning between slices', async () => {
    const pairs: [string, string][] = [];
    for (let i = 0; i < 2_500; i++) pairs.push([`S${i}`, `value-${i}-${(i * 7919) % 10007}`]);
    // One value under two names (the last one names it) and one value that contains another.
    pairs.push(['TWICE_A', 'shared-value'], ['TWICE_B', 'shared-value'], ['INNER', 'value-12'], ['SHORT', 'ab']);
    // As prepareMaskAny makes one: 500 values a step, a turn of the event loop between steps.
    const inTurns = async () => {
      const steps = SecretMasker.inSteps(pairs[Symbol.iterator]());
      while (steps.step(500)) await new Promise((resolve) => setImmediate(resolve));
      return steps.finish();
    };
    const { result: sliced, turns } = await turnsDuring(inTurns);
    expect(turns).toBeGreaterThanOrEqual(4);
    const whole = new SecretMasker(pairs);
    for (const text of ['x value-12-1 y', 'value-12', 'shared-value!', 'ab value-2499-8200 value-0-0', 'nothing here']) {
      expect(sliced.maskText(text), text).toBe(whole.maskText(text));
    }
    expect(sliced.maskText('shared-value')).toBe('<secret:TWICE_B>');
    expect(sliced.maskText('(value-12)')).toBe('(<secret:INNER>)');
    expect(sliced.settledLength('tail value-1')).toBe(whole.settledLength('tail value-1'));
  });
});

describe('SecretMasker.add', () => {
  it('masks as a masker made with all the values, on random texts: each value longest first, a value added again under a new name', () => {
    const alphabet = 'ab1-é';
    const random = (length: number) => Array.from({ length }, () => alphabet[Math.floor(Math.random() * alphabet.length)]).join('');
    for (let round = 0; round < 200; round++) {
      const pairs: [string, string][] = Array.from({ length: 2 + Math.floor(Math.random() * 8) }, (_, i) => [`S${i}`, random(2 + Math.floor(Math.random() * 6))]);
      const cut = Math.floor(Math.random() * pairs.length);
      const grown = new SecretMasker(pairs.slice(0, cut));
      grown.add(pairs.slice(cut));
      const whole = new SecretMasker(pairs);
      for (let i = 0; i < 20; i++) {
        const text = random(Math.floor(Math.random() * 60));
        expect(grown.maskText(text), JSON.stringify({ pairs, cut, text })).toBe(whole.maskText(text));
      }
    }
    const masker = new SecretMasker([['A', 'abcd']]);
    masker.add([['LONGER', 'abcdef'], ['B', 'abcd'], ['SHORT', 'ab']]);
    expect(masker.maskText('abcdef abcd ab')).toBe('<secret:LONGER> <secret:B> ab');
    expect(masker.size).toBe(2);
    // Sized for 64 bits a value, up to 2^20 bits: past 16,384 values no bigger one would be made.
    expect([masker.capacity, new SecretMasker(Array.from({ length: 1_000 }, (_, i): [string, string] => [`S${i}`, `value-${i}`])).capacity]).toEqual([16, 1_024]);
    expect(new SecretMasker(Array.from({ length: 20_000 }, (_, i): [string, string] => [`S${i}`, `value-${i}`])).capacity).toBe(Number.POSITIVE_INFINITY);
  });
});

describe('the log scrubber over every conversation', () => {
  it('masks every value when conversations share a secret name', async () => {
    const { startServer } = await import('../support/agentd.js');
    const server = await startServer({ listen: false });
    try {
      for (const value of ['ghp_AAAA_first_value', 'ghp_BBBB_second_value']) {
        server.services.conversations.create({ max_iterations_per_run: 10, confirmation_mode: false, secrets: { GITHUB_TOKEN: value } });
      }
      expect(server.services.secrets.maskAny('ghp_AAAA_first_value and ghp_BBBB_second_value')).toBe('<secret:GITHUB_TOKEN> and <secret:GITHUB_TOKEN>');
    } finally {
      await server.close();
    }
  });

  it('prepared a slice at a time after start-up, masks every value, and one added meanwhile too', async () => {
    const { startServer } = await import('../support/agentd.js');
    const server = await startServer({ listen: false });
    try {
      const { conversations, secrets } = server.services;
      const token = (i: number) => `tok_${i}_${(i * 7919) % 10007}_x`;
      for (let i = 0; i < 2_500; i++) conversations.create({ max_iterations_per_run: 10, confirmation_mode: false, secrets: { TOKEN: token(i) } });
      const index = () => (secrets as unknown as { everyMasker: unknown }).everyMasker;
      await secrets.prepareMaskAny();
      const prepared = index();
      expect(prepared).not.toBeNull();
      expect(secrets.maskAny(`${token(0)} then ${token(2499)}`)).toBe('<secret:TOKEN> then <secret:TOKEN>');
      // The log's first line used the prepared index: it did not build its own.
      expect(index()).toBe(prepared);
      // Secrets that change while it is prepared: the index it made is not the one used.
      const preparing = secrets.prepareMaskAny();
      conversations.create({ max_iterations_per_run: 10, confirmation_mode: false, secrets: { LATE: 'late_value_added' } });
      await preparing;
      expect(secrets.maskAny(`late_value_added and ${token(7)}`)).toBe('<secret:LATE> and <secret:TOKEN>');
    } finally {
      await server.close();
    }
  });

  it('prepared a slice at a time, is finished by a log line before its last slice: each value indexed once', async () => {
    const { startServer } = await import('../support/agentd.js');
    const server = await startServer({ listen: false });
    try {
      const { conversations, secrets } = server.services;
      const token = (i: number) => `tok_${i}_${(i * 7919) % 10007}_y`;
      for (let i = 0; i < 3_000; i++) conversations.create({ max_iterations_per_run: 10, confirmation_mode: false, secrets: { TOKEN: token(i) } });
      const indexValue = vi.spyOn(SecretMasker.prototype as unknown as { indexValue: () => void }, 'indexValue');
      try {
        const preparing = secrets.prepareMaskAny();
        // A few slices in (3,000 values are collected, then indexed, 1,000 a turn), a log line.
        for (let turn = 0; turn < 4; turn++) await new Promise((resolve) => setImmediate(resolve));
        expect(indexValue.mock.calls.length).toBeLessThan(3_000);
        expect(secrets.maskAny(`${token(0)} and ${token(2999)}`)).toBe('<secret:TOKEN> and <secret:TOKEN>');
        const used = (secrets as unknown as { everyMasker: unknown }).everyMasker;
        await preparing;
        expect((secrets as unknown as { everyMasker: unknown }).everyMasker).toBe(used);
        // What the slices had not done was done then, once: not a second index of every value.
        expect(indexValue).toHaveBeenCalledTimes(3_000);
      } finally {
        indexValue.mockRestore();
      }
    } finally {
      await server.close();
    }
  });

  it('takes the values of each conversation created or given secrets since it was made, and is made again only once many removed ones are in it', { timeout: 120_000 }, async () => {
    const { startServer } = await import('../support/agentd.js');
    const server = await startServer({ listen: false });
    try {
      const { conversations, secrets } = server.services;
      const index = () => (secrets as unknown as { everyMasker: unknown }).everyMasker;
      const create = (name: string, value: string) => conversations.create({ max_iterations_per_run: 10, confirmation_mode: false, secrets: { [name]: value } });
      const ids: string[] = [];
      for (let i = 0; i < 1_500; i++) ids.push((await create('TOKEN', `tok_${i}_value`)).record.id);
      expect(secrets.maskAny('tok_7_value')).toBe('<secret:TOKEN>');
      const made = index();
      // A conversation created, another given a secret: the same index, their values in it.
      await create('LATER', 'later_value_1');
      await secrets.put(ids[3]!, { EXTRA: 'extra_value_3' });
      expect(secrets.maskAny('later_value_1 extra_value_3 tok_3_value')).toBe('<secret:LATER> <secret:EXTRA> <secret:TOKEN>');
      expect(index()).toBe(made);
      // Removed: its values stay masked, until there are more of those than 1,000 and a third of its values.
      await conversations.delete(ids[0]!, { deleteWorkdir: false });
      expect(secrets.maskAny('tok_0_value')).toBe('<secret:TOKEN>');
      expect(index()).toBe(made);
      for (const id of ids.slice(1, 1_002)) await conversations.delete(id, { deleteWorkdir: false });
      expect(secrets.maskAny('tok_0_value tok_1499_value')).toBe('tok_0_value <secret:TOKEN>');
      expect(index()).not.toBe(made);
    } finally {
      await server.close();
    }
  });
});
