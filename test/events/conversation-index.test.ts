// The conversations held in memory (conversation-index.ts, sorted-index.ts) as start-up fills them
// at once (addAll): listed in the same order, whatever order they were loaded in, as when added
// one by one; by updated_at too when it is not the order of created_at; onto records already
// held; and records share one tool list per distinct list, never another record's different one
// (and one sandbox settings object per network).
// Loaded records are found at once, and sorted at the first listing or change, or once the server
// listens (one order per turn of the event loop). Quarantined records are held apart for /health.
import v8 from 'node:v8';
import { describe, expect, it, vi } from 'vitest';
import { ConversationIndex } from '../../src/core/conversations/conversation-index.js';
import type { ConversationRecord } from '../../src/core/conversations/conversation-record.js';
import { SortedIndex } from '../../src/core/conversations/sorted-index.js';
import { keyListsSeen, MAX_CANDIDATES, MAX_SHARED_KEY_LISTS, userKeyed } from '../../src/core/conversations/user-keyed.js';
import { storedRecord } from '../support/stored-record.js';

const at = (second: number) => new Date(Date.UTC(2026, 10, 23, 1, 0, second)).toISOString();

/** A deterministic shuffle (no Math.random: a failure can be replayed). */
function shuffled<T>(items: readonly T[], seed = 7): T[] {
  const out = [...items];
  let state = seed;
  for (let i = out.length - 1; i > 0; i--) {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    const j = state % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** 40 records created a second apart (some in the same second, told apart by id), updated in another order. */
function records(): ConversationRecord[] {
  return Array.from({ length: 40 }, (_, i) =>
    storedRecord(`c-${String(i).padStart(2, '0')}`, { created_at: at(Math.floor(i / 3)), updated_at: at(100 + ((i * 17) % 40)), tools: i % 5 === 0 ? ['bash', 'glob'] : ['bash', 'grep'] }),
  );
}

const ids = (page: { items: readonly ConversationRecord[] }) => page.items.map((record) => record.id);

function listAll(index: ConversationIndex, sort: 'created_at' | 'updated_at', order: 'asc' | 'desc'): string[] {
  const out: string[] = [];
  let pageId: string | undefined;
  for (;;) {
    const page = index.page({ sort, order, limit: 7, ...(pageId ? { pageId } : {}) });
    out.push(...ids(page));
    if (!page.next_page_id) return out;
    pageId = page.next_page_id;
  }
}

describe('the conversations index filled at start-up', () => {
  it('lists loaded records by created_at and by updated_at, both orders, as records added one by one', () => {
    const one = new ConversationIndex();
    for (const record of records()) one.add(record);
    for (const loadOrder of [records(), shuffled(records()), records().reverse()]) {
      const all = new ConversationIndex();
      all.addAll(loadOrder);
      for (const sort of ['created_at', 'updated_at'] as const) {
        for (const order of ['asc', 'desc'] as const) expect(listAll(all, sort, order)).toEqual(listAll(one, sort, order));
      }
      // updated_at is not the order of created_at here: the listing by it must not follow created_at.
      expect(listAll(all, 'updated_at', 'asc')).not.toEqual(listAll(all, 'created_at', 'asc'));
    }
  });

  it('adds loaded records to those already held, in order', () => {
    const [first, ...rest] = shuffled(records(), 11);
    const index = new ConversationIndex();
    index.add(first!);
    index.addAll(rest.slice(0, 20));
    index.addAll(rest.slice(20));
    const one = new ConversationIndex();
    for (const record of records()) one.add(record);
    for (const sort of ['created_at', 'updated_at'] as const) expect(listAll(index, sort, 'asc')).toEqual(listAll(one, sort, 'asc'));
    expect(index.size).toBe(40);
  });

  it('gives records with the same tool list one shared list, and each different list its own', () => {
    const index = new ConversationIndex();
    const loaded = shuffled(records(), 3);
    index.addAll(loaded);
    const glob = loaded.filter((record) => record.tools.includes('glob'));
    const grep = loaded.filter((record) => record.tools.includes('grep'));
    expect(glob.length).toBe(8);
    expect(grep.length).toBe(32);
    for (const record of glob) expect(record.tools).toBe(glob[0]!.tools);
    for (const record of grep) expect(record.tools).toBe(grep[0]!.tools);
    expect(glob[0]!.tools).toEqual(['bash', 'glob']);
    expect(grep[0]!.tools).toEqual(['bash', 'grep']);
  });

  it('gives records with the same sandbox settings one shared, frozen object, and each network its own', () => {
    const networks = [true, false, 'host'] as const;
    const loaded = records().map((record, i) => ({ ...record, sandbox: { network: networks[i % 3]! } }));
    const index = new ConversationIndex();
    index.addAll(loaded);
    for (const network of networks) {
      const alike = loaded.filter((record) => record.sandbox.network === network);
      for (const record of alike) expect(record.sandbox).toBe(alike[0]!.sandbox);
      expect(alike[0]!.sandbox).toEqual({ network });
      expect(Object.isFrozen(alike[0]!.sandbox)).toBe(true);
    }
    expect(new Set(loaded.map((record) => record.sandbox)).size).toBe(3);
  });
});

describe('the records loaded together, before they are sorted', () => {
  it('are found at once, and listed in order after a removal, an update, an add or their sorting (once the server listens) before the first listing', () => {
    const changes: ((index: ConversationIndex, loaded: ConversationRecord[]) => void)[] = [
      (index, loaded) => index.remove(loaded[5]!),
      (index, loaded) => {
        const record = loaded[9]!;
        const old = record.updated_at;
        record.updated_at = at(500);
        index.updated(record, old);
      },
      (index) => index.add(storedRecord('c-new', { created_at: at(3), updated_at: at(120) })),
      (index) => index.sortLoaded(),
    ];
    for (const change of changes) {
      const [loaded, expected] = [shuffled(records(), 5), shuffled(records(), 5)];
      const index = new ConversationIndex();
      const insertAll = vi.spyOn(SortedIndex.prototype, 'insertAll');
      index.addAll(loaded);
      // Not sorted yet: a start answers before its listing's orders are made.
      expect(insertAll).not.toHaveBeenCalled();
      insertAll.mockRestore();
      expect(index.get(loaded[0]!.id)).toBe(loaded[0]);
      expect(index.size).toBe(40);
      const reference = new ConversationIndex();
      for (const record of expected) reference.add(record);
      change(index, loaded);
      change(reference, expected);
      for (const sort of ['created_at', 'updated_at'] as const) {
        for (const order of ['asc', 'desc'] as const) expect(listAll(index, sort, order), String(change)).toEqual(listAll(reference, sort, order));
      }
    }
  });
});

describe('the records loaded together, sorted once the server listens', () => {
  it('are sorted one order per turn of the event loop, and a change between the two leaves both orders right', async () => {
    const [loaded, expected] = [shuffled(records(), 13), shuffled(records(), 13)];
    const index = new ConversationIndex();
    index.addAll(loaded);
    const reference = new ConversationIndex();
    for (const record of expected) reference.add(record);
    const pending = index as unknown as { unsortedCreated: unknown[]; unsortedUpdated: unknown[] };
    const between: number[][] = [];
    // Queued before the sorting's own turn: it runs between its two sorts.
    setImmediate(() => {
      between.push([pending.unsortedCreated.length, pending.unsortedUpdated.length]);
      for (const target of [index, reference]) target.add(storedRecord('c-between', { created_at: at(4), updated_at: at(99) }));
    });
    await index.sortLoadedInTurns();
    // By created_at first; by updated_at only in a later turn (the add above sorted it itself).
    expect(between).toEqual([[0, 40]]);
    expect(pending.unsortedUpdated).toEqual([]);
    for (const sort of ['created_at', 'updated_at'] as const) {
      for (const order of ['asc', 'desc'] as const) expect(listAll(index, sort, order)).toEqual(listAll(reference, sort, order));
    }
  });
});

describe('the user-keyed maps of records loaded together', () => {
  // The key lists seen are per process (user-keyed.ts): this file runs in a process of its own (vitest.config.ts).
  v8.setFlagsFromString('--allow-natives-syntax');
  const sameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: object, b: object) => boolean;
  const fast = new Function('a', 'return %HasFastProperties(a)') as (a: object) => boolean;

  it('are held on one shared hidden class from the first record on, a list seen once in dictionary mode', () => {
    // Key names this process has not seen: their first sight is among these records.
    const name = `LOADED_TOGETHER_${process.pid}_${Date.now()}`;
    const loaded = [0, 1, 2].map((i) => storedRecord(`c-k${i}`, { secrets: { [name]: `value-${i}` }, metadata: { [`${name}_meta`]: `m-${i}` } }));
    const alone = storedRecord('c-alone', { secrets: { [`${name}_ALONE`]: 'value-alone' } });
    const index = new ConversationIndex();
    index.addAll([loaded[0]!, alone, loaded[1]!, loaded[2]!]);
    for (const record of loaded.slice(1)) {
      expect(sameMap(loaded[0]!.secrets, record.secrets)).toBe(true);
      expect(sameMap(loaded[0]!.metadata!, record.metadata!)).toBe(true);
    }
    expect(fast(loaded[0]!.secrets)).toBe(true);
    expect(fast(alone.secrets)).toBe(false);
    // Held as copies with what they held, ordinary objects for whoever reads them.
    expect(loaded.map((record) => [record.secrets, record.metadata])).toEqual([0, 1, 2].map((i) => [{ [name]: `value-${i}` }, { [`${name}_meta`]: `m-${i}` }]));
    expect(Object.getPrototypeOf(loaded[0]!.secrets)).toBe(Object.prototype);
  });

  it('share it from every first sight when the lists seen once were forgotten between two sights', () => {
    expect(keyListsSeen().shared).toBeLessThan(MAX_SHARED_KEY_LISTS);
    // Two before the bound: the first record's two lists reach it, and the next record's sight forgets them.
    for (let i = 0; keyListsSeen().candidates !== MAX_CANDIDATES - 2; i++) userKeyed({ [`FILLER_${process.pid}_${i}`]: 1 });
    const name = `FORGOTTEN_${process.pid}_${Date.now()}`;
    const loaded = [0, 1, 2].map((i) => storedRecord(`c-f${i}`, { secrets: { [name]: `value-${i}` }, metadata: { [`${name}_meta`]: `m-${i}` } }));
    const alone = storedRecord('c-f-alone', { secrets: { [`${name}_ALONE`]: 'value-alone' } });
    new ConversationIndex().addAll([loaded[0]!, alone, loaded[1]!, loaded[2]!]);
    expect(keyListsSeen().candidates).toBeLessThan(MAX_CANDIDATES - 2);
    for (const record of loaded) expect([fast(record.secrets), fast(record.metadata!)]).toEqual([true, true]);
    for (const record of loaded.slice(1)) expect([sameMap(loaded[0]!.secrets, record.secrets), sameMap(loaded[0]!.metadata!, record.metadata!)]).toEqual([true, true]);
    expect(loaded.map((record) => record.secrets)).toEqual([0, 1, 2].map((i) => ({ [name]: `value-${i}` })));
  });
});

describe('the quarantined records held', () => {
  it('are those loaded or added quarantined, or quarantined in place, until removed', () => {
    const damage = { file: 'conversation.json', line: null, reason: 'not valid JSON' };
    const index = new ConversationIndex();
    const [loadedDamaged, healthy, foundLater] = [storedRecord('c-a', { quarantine: damage }), storedRecord('c-b'), storedRecord('c-c')];
    index.addAll([loadedDamaged, healthy, foundLater]);
    const added = storedRecord('c-d', { quarantine: damage });
    index.add(added);
    expect([...index.quarantined()]).toEqual([loadedDamaged, added]);
    foundLater.quarantine = damage;
    index.quarantinedInPlace(foundLater);
    // Not held: not listed.
    index.quarantinedInPlace(storedRecord('c-elsewhere', { quarantine: damage }));
    expect([...index.quarantined()].map((record) => record.id)).toEqual(['c-a', 'c-d', 'c-c']);
    index.remove(loadedDamaged);
    index.remove(foundLater);
    expect([...index.quarantined()]).toEqual([added]);
  });
});

describe('SortedIndex.insertAll', () => {
  const keyed = (pairs: [string, string][]) => pairs.map(([key, id]) => ({ key, id }));
  const order = (index: SortedIndex<{ key: string; id: string }>) => index.page({ order: 'asc', limit: 100 }).items.map((item) => `${item.key}/${item.id}`);

  it('sorts items given out of order, by key then id, and keeps items given in order as they are', () => {
    const index = new SortedIndex<{ key: string; id: string }>((item) => item.key);
    index.insertAll(keyed([['b', '2'], ['a', '9'], ['b', '1'], ['a', '1']]));
    expect(order(index)).toEqual(['a/1', 'a/9', 'b/1', 'b/2']);
    const inOrder = new SortedIndex<{ key: string; id: string }>((item) => item.key);
    inOrder.insertAll(keyed([['a', '1'], ['a', '9'], ['b', '1']]));
    inOrder.insertAll(keyed([['a', '5'], ['c', '0']]));
    expect(order(inOrder)).toEqual(['a/1', 'a/5', 'a/9', 'b/1', 'c/0']);
  });
});
