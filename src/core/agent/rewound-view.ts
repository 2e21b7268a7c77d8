/** A conversation rewind as the history sees it: at seq `at`, the LLM's view went back to before seq `to`. */
export interface HistoryRewind {
  at: number;
  to: number;
}

/**
 * The seq ranges (inclusive) of the events the LLM sees just before seq `before`, given the
 * conversation rewinds recorded so far (in seq order). The view before a rewind's target is the
 * view as it was then, so rewinding to a checkpoint inside a range an earlier rewind left
 * brings that range back: view(x) = view(r.to) + (r.at, x) for the last rewind r before x.
 */
export function liveRanges(rewinds: readonly HistoryRewind[], before: number): [number, number][] {
  const ranges: [number, number][] = [];
  let end = before;
  let index = rewinds.length - 1;
  for (;;) {
    while (index >= 0 && rewinds[index]!.at >= end) index -= 1;
    const last = index >= 0 ? rewinds[index]! : null;
    const from = last ? last.at + 1 : 1;
    if (from <= end - 1) ranges.unshift([from, end - 1]);
    if (!last) return ranges;
    end = Math.min(last.to, last.at);
    index -= 1;
  }
}
