import type { HistoryEntry } from './conversation-history.js';

/** Which messages of the history a condensation replaces, and the event range they came from. */
export interface CondensationPlan {
  /** Index in the history of the first message forgotten, and one past the last. */
  start: number;
  end: number;
  fromSeq: number;
  toSeq: number;
}

/** Fewer messages than this are not worth a summary. */
const MIN_FORGOTTEN = 2;

/**
 * The block between the first `keepFirst` and the last `keepLast` messages, moved so that it
 * never separates a tool call from its results: it never starts or ends before a tool result,
 * and the events it came from form a seq range no kept message was folded from (a user message
 * that waited for a call's result sits after it in the history but has an earlier seq). More is
 * kept rather than less when the cut must move. Null when there is nothing worth condensing.
 */
export function planCondensation(entries: readonly HistoryEntry[], options: { keepFirst: number; keepLast: number; laterSeq?: number }): CondensationPlan | null {
  const n = entries.length;
  let start = Math.min(options.keepFirst, n);
  while (start < n && entries[start]!.role === 'tool') start += 1;
  // The highest seq of everything before an index, the lowest of everything from an index on.
  const maxBefore: number[] = new Array(n + 1).fill(0);
  for (let i = 0; i < n; i += 1) maxBefore[i + 1] = Math.max(maxBefore[i]!, entries[i]!.lastSeq);
  // `laterSeq`: the lowest seq of what follows the entries and is kept too (messages waiting for a turn to end).
  const minFrom: number[] = new Array(n + 1).fill(options.laterSeq ?? Number.POSITIVE_INFINITY);
  for (let i = n - 1; i >= 0; i -= 1) minFrom[i] = Math.min(minFrom[i + 1]!, entries[i]!.seq);
  for (; start + MIN_FORGOTTEN <= n; start += 1) {
    if (entries[start]!.role === 'tool') continue;
    for (let end = Math.max(n - options.keepLast, 0); end >= start + MIN_FORGOTTEN; end -= 1) {
      if (end < n && entries[end]!.role === 'tool') continue;
      let fromSeq = Number.POSITIVE_INFINITY;
      let toSeq = 0;
      for (let i = start; i < end; i += 1) {
        fromSeq = Math.min(fromSeq, entries[i]!.seq);
        toSeq = Math.max(toSeq, entries[i]!.lastSeq);
      }
      if (maxBefore[start]! < fromSeq && minFrom[end]! > toSeq) return { start, end, fromSeq, toSeq };
    }
    // No end works for this start: one message more at the head may make a range that does.
  }
  return null;
}
