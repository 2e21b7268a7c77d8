/** Ascending lists of seqs (one per event kind): binary search and an ordered merge within a window. */

/** Index of the first element >= value in an ascending list. */
export function lowerBound(list: readonly number[], value: number): number {
  let low = 0;
  let high = list.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if ((list[middle] as number) < value) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** The seqs of several ascending lists within [low, high], merged, ascending or descending. */
export function* seqsInWindow(options: { lists: (readonly number[])[]; low: number; high: number; order: 'asc' | 'desc' }): Generator<number> {
  const { lists, low, high, order } = options;
  const positions = lists.map((list) => (order === 'asc' ? lowerBound(list, low) : lowerBound(list, high + 1) - 1));
  for (;;) {
    let best = -1;
    for (let index = 0; index < lists.length; index++) {
      const seq = (lists[index] as readonly number[])[positions[index] as number];
      if (seq === undefined || seq < low || seq > high) continue;
      const current = best === -1 ? undefined : (lists[best] as readonly number[])[positions[best] as number];
      if (current === undefined || (order === 'asc' ? seq < current : seq > current)) best = index;
    }
    if (best === -1) return;
    yield (lists[best] as readonly number[])[positions[best] as number] as number;
    positions[best] = (positions[best] as number) + (order === 'asc' ? 1 : -1);
  }
}
