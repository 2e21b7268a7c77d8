import { describe, expect, it } from 'vitest';
import { liveRanges } from '../../src/core/agent/rewound-view.js';

describe('the LLM view after conversation rewinds', () => {
  it('without rewinds is every event before the point', () => {
    expect(liveRanges([], 11)).toEqual([[1, 10]]);
    expect(liveRanges([], 1)).toEqual([]);
  });

  it('drops what a rewind went back over, and keeps what follows it', () => {
    // Events 1..10, a rewind at 11 to before 5, then events 12..15.
    const rewinds = [{ at: 11, to: 5 }];
    expect(liveRanges(rewinds, 11)).toEqual([[1, 10]]);
    expect(liveRanges(rewinds, 12)).toEqual([[1, 4]]);
    expect(liveRanges(rewinds, 16)).toEqual([[1, 4], [12, 15]]);
  });

  it('a later rewind to a point inside a range an earlier one dropped brings that range back as it was', () => {
    const rewinds = [{ at: 11, to: 5 }, { at: 16, to: 8 }];
    expect(liveRanges(rewinds, 20)).toEqual([[1, 7], [17, 19]]);
  });

  it('a rewind to a point after an earlier rewind keeps that rewind in force; undo (to the rewind itself) restores the view before it', () => {
    const rewinds = [{ at: 11, to: 5 }, { at: 16, to: 13 }];
    expect(liveRanges(rewinds, 17)).toEqual([[1, 4], [12, 12]]);
    const undo = [{ at: 11, to: 5 }, { at: 13, to: 11 }];
    expect(liveRanges(undo, 14)).toEqual([[1, 10]]);
  });
});
