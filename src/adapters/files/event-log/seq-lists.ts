/** Ordered merges of seq streams (one per event kind, each ascending or each descending). */

/** The seqs of several streams in one order (`asc`: each stream ascending; `desc`: each descending). */
export function* mergeSeqs(streams: Iterator<number>[], order: 'asc' | 'desc'): Generator<number> {
  if (streams.length === 1) {
    for (let next = streams[0]!.next(); !next.done; next = streams[0]!.next()) yield next.value;
    return;
  }
  const heads = streams.map((stream) => stream.next());
  for (;;) {
    let best = -1;
    for (let index = 0; index < heads.length; index++) {
      const head = heads[index]!;
      if (head.done) continue;
      if (best === -1 || (order === 'asc' ? head.value < (heads[best]!.value as number) : head.value > (heads[best]!.value as number))) best = index;
    }
    if (best === -1) return;
    yield heads[best]!.value as number;
    heads[best] = streams[best]!.next();
  }
}

/** Take up to `n` values from an iterator. */
export function take(iterator: Iterator<number>, n: number): number[] {
  const out: number[] = [];
  while (out.length < n) {
    const next = iterator.next();
    if (next.done) break;
    out.push(next.value);
  }
  return out;
}
