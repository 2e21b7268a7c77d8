/**
 * CompactWhenIdle (a reader of every event in `agentd serve`): the heap is compacted once the last
 * run in progress has ended and none started for a while; never while a run is in progress, never
 * twice without a run ending between, and not when nothing ran. Timers are vitest's fake ones.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { COMPACT_AFTER_START_MS, COMPACT_WHEN_IDLE_AFTER_MS, CompactWhenIdle } from '../../src/perf/compact-when-idle.js';
import type { AppendedEvent } from '../../src/core/events/event-log.js';

const A = '00000000-0000-4000-8000-00000000000a';
const B = '00000000-0000-4000-8000-00000000000b';
let seq = 0;

function stateUpdate(conversationId: string, status: string): AppendedEvent {
  seq += 1;
  return { globalCursor: seq, event: { kind: 'state_update', source: 'system', status, run_id: 'run', reason: null, id: `id-${seq}`, seq, conversation_id: conversationId, timestamp: new Date(0).toISOString() } } as unknown as AppendedEvent;
}

function other(conversationId: string): AppendedEvent {
  seq += 1;
  return { globalCursor: seq, event: { kind: 'message', source: 'agent', id: `id-${seq}`, seq, conversation_id: conversationId, timestamp: new Date(0).toISOString() } } as unknown as AppendedEvent;
}

describe('CompactWhenIdle', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('compacts once after the last run in progress ends and the server stays quiet', () => {
    const compact = vi.fn(async () => undefined);
    const reader = new CompactWhenIdle({ compact, quietMs: 100 });
    reader.read(stateUpdate(A, 'running'));
    reader.read(stateUpdate(B, 'running'));
    reader.read(stateUpdate(A, 'idle'));
    vi.advanceTimersByTime(1000);
    expect(compact).not.toHaveBeenCalled(); // B still runs
    reader.read(other(B));
    reader.read(stateUpdate(B, 'finished'));
    vi.advanceTimersByTime(99);
    expect(compact).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(compact).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(10_000);
    expect(compact).toHaveBeenCalledTimes(1);
  });

  it('compacts what start-up left once the server is quiet after it, not while a run is in progress', () => {
    const compact = vi.fn(async () => undefined);
    const reader = new CompactWhenIdle({ compact, startQuietMs: 100 });
    reader.afterStart();
    vi.advanceTimersByTime(99);
    expect(compact).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(compact).toHaveBeenCalledTimes(1);

    const compactBusy = vi.fn(async () => undefined);
    const busy = new CompactWhenIdle({ compact: compactBusy, quietMs: 100 });
    busy.read(stateUpdate(A, 'running'));
    busy.afterStart();
    vi.advanceTimersByTime(1000);
    expect(compactBusy).not.toHaveBeenCalled();
    busy.read(stateUpdate(A, 'idle'));
    vi.advanceTimersByTime(100);
    expect(compactBusy).toHaveBeenCalledTimes(1);
  });

  it('by default waits 30 s after runs (a person pausing between turns keeps its optimized code) and 250 ms after start-up', () => {
    expect([COMPACT_WHEN_IDLE_AFTER_MS, COMPACT_AFTER_START_MS]).toEqual([30_000, 250]);
    const compact = vi.fn(async () => undefined);
    const reader = new CompactWhenIdle({ compact });
    reader.afterStart();
    vi.advanceTimersByTime(249);
    expect(compact).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(compact).toHaveBeenCalledTimes(1);
    // Turns 10 s apart (a person reading each answer): none is followed by a compaction until the client stops.
    for (let turn = 0; turn < 5; turn++) {
      reader.read(stateUpdate(A, 'running'));
      reader.read(stateUpdate(A, 'idle'));
      vi.advanceTimersByTime(10_000);
    }
    expect(compact).toHaveBeenCalledTimes(1);
    vi.advanceTimersByTime(20_000);
    expect(compact).toHaveBeenCalledTimes(2);
  });

  it('does not compact when a run starts again within the quiet time', () => {
    const compact = vi.fn(async () => undefined);
    const reader = new CompactWhenIdle({ compact, quietMs: 100 });
    reader.read(stateUpdate(A, 'running'));
    reader.read(stateUpdate(A, 'idle'));
    vi.advanceTimersByTime(50);
    reader.read(stateUpdate(B, 'running'));
    vi.advanceTimersByTime(1000);
    expect(compact).not.toHaveBeenCalled();
    reader.read(stateUpdate(B, 'idle'));
    vi.advanceTimersByTime(100);
    expect(compact).toHaveBeenCalledTimes(1);
  });

  it('does nothing for state updates of conversations that were not running, nor after close()', () => {
    const compact = vi.fn(async () => undefined);
    const reader = new CompactWhenIdle({ compact, quietMs: 100 });
    reader.read(stateUpdate(A, 'idle'));
    reader.read(stateUpdate(A, 'paused'));
    vi.advanceTimersByTime(1000);
    expect(compact).not.toHaveBeenCalled();
    reader.read(stateUpdate(A, 'running'));
    reader.read(stateUpdate(A, 'error'));
    reader.close();
    vi.advanceTimersByTime(1000);
    expect(compact).not.toHaveBeenCalled();
  });

  it('gives these collections at most 5 % of the time: after one that took 50 ms, the next waits 1 s', async () => {
    let clock = 0;
    const compact = vi.fn(async () => {
      clock += 50;
    });
    const now = () => clock + Date.now();
    const reader = new CompactWhenIdle({ compact, quietMs: 100, now });
    reader.read(stateUpdate(A, 'running'));
    reader.read(stateUpdate(A, 'idle'));
    await vi.advanceTimersByTimeAsync(100);
    expect(compact).toHaveBeenCalledTimes(1);
    // Another run ends right after: it is compacted once the second has passed, not after its quiet time.
    reader.read(stateUpdate(A, 'running'));
    reader.read(stateUpdate(A, 'idle'));
    await vi.advanceTimersByTimeAsync(800);
    expect(compact).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(200);
    expect(compact).toHaveBeenCalledTimes(2);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(compact).toHaveBeenCalledTimes(2);
  });
});
