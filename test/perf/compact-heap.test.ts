/**
 * compactHeap (run by `agentd serve` once start-up is done and the server quiet): the pages a full
 * collection leaves partly used are compacted and released, the young generation V8 grew is given
 * back, and nothing of the flags it sets stays (no `gc` in contexts made later).
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import { describe, expect, it } from 'vitest';
import { compactHeap } from '../../src/perf/compact-heap.js';

function oldSpace(): { size: number; used: number } {
  const space = v8.getHeapSpaceStatistics().find((entry) => entry.space_name === 'old_space')!;
  return { size: space.space_size, used: space.space_used_size };
}

function youngGeneration(): number {
  return v8.getHeapSpaceStatistics().find((entry) => entry.space_name === 'new_space')!.space_size;
}

describe('compactHeap', () => {
  it('releases the old-space pages that a full collection leaves partly used, and the young generation V8 grew', async () => {
    // Kept objects spread over pages between garbage, as start-up leaves them.
    let all: { index: number; text: string }[] | null = [];
    for (let index = 0; index < 300_000; index++) all.push({ index, text: `item ${index}` });
    const kept = all.filter((_, index) => index % 20 === 0);
    all = null;
    // V8's own full collection (taken here as compactHeap's fallback takes it) frees the garbage and keeps most pages.
    v8.setFlagsFromString('--expose-gc');
    (vm.runInNewContext('gc') as () => void)();
    v8.setFlagsFromString('--no-expose-gc');
    const before = oldSpace();
    expect(before.size).toBeGreaterThan(2 * before.used);

    const youngBefore = youngGeneration();
    expect(await compactHeap()).toBe(true);
    const after = oldSpace();
    expect(after.size).toBeLessThan(1.5 * after.used);
    expect(after.size).toBeLessThan(before.size / 2);
    expect(youngGeneration()).toBeLessThan(youngBefore);
    expect(kept).toHaveLength(15_000);
    expect(kept[100]).toEqual({ index: 2_000, text: 'item 2000' });
    // The flag that exposed `gc` was for that one context.
    expect(vm.runInNewContext('typeof gc')).toBe('undefined');
  });
});
