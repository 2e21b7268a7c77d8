import { describe, expect, it } from 'vitest';
import { checkRule, takeSlots, type DstPolicy } from '../../src/core/schedules/schedule-times.js';
import { InvalidScheduleError } from '../../src/core/schedules/invalid-schedule-error.js';

const at = (iso: string) => Date.parse(iso);
const iso = (slots: number[]) => slots.map((slot) => new Date(slot).toISOString());

function slots(options: { cron?: string; every?: string; timezone: string; dst?: Partial<DstPolicy>; after: string; count: number; anchor?: string }) {
  const rule = { cron: options.cron, every: options.every, timezone: options.timezone, dst: { gap: 'shift', repeat: 'once', ...options.dst } as DstPolicy, anchor: at(options.anchor ?? options.after) };
  return iso(takeSlots(rule, at(options.after), { count: options.count }));
}

describe('30 2 * * * across DST', () => {
  // 2026-03-08: New York springs forward at 02:00 (EST -5 to EDT -4): 02:30 does not exist that night.
  it('America/New_York gap: shift fires at 03:30 EDT, skip leaves the night out', () => {
    const after = '2026-03-07T00:00:00.000Z';
    expect(slots({ cron: '30 2 * * *', timezone: 'America/New_York', after, count: 3 })).toEqual(['2026-03-07T07:30:00.000Z', '2026-03-08T07:30:00.000Z', '2026-03-09T06:30:00.000Z']);
    expect(slots({ cron: '30 2 * * *', timezone: 'America/New_York', dst: { gap: 'skip' }, after, count: 2 })).toEqual(['2026-03-07T07:30:00.000Z', '2026-03-09T06:30:00.000Z']);
  });

  // 2026-03-29: Berlin springs forward at 02:00 (CET +1 to CEST +2).
  it('Europe/Berlin gap: shift fires at 03:30 CEST, skip leaves the night out', () => {
    const after = '2026-03-28T00:00:00.000Z';
    expect(slots({ cron: '30 2 * * *', timezone: 'Europe/Berlin', after, count: 3 })).toEqual(['2026-03-28T01:30:00.000Z', '2026-03-29T01:30:00.000Z', '2026-03-30T00:30:00.000Z']);
    expect(slots({ cron: '30 2 * * *', timezone: 'Europe/Berlin', dst: { gap: 'skip' }, after, count: 2 })).toEqual(['2026-03-28T01:30:00.000Z', '2026-03-30T00:30:00.000Z']);
  });

  // 2026-10-25: Berlin falls back at 03:00 CEST to 02:00 CET: 02:30 happens twice.
  it('Europe/Berlin repeat: once fires at the first 02:30, both at each', () => {
    const after = '2026-10-24T12:00:00.000Z';
    expect(slots({ cron: '30 2 * * *', timezone: 'Europe/Berlin', after, count: 2 })).toEqual(['2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z']);
    expect(slots({ cron: '30 2 * * *', timezone: 'Europe/Berlin', dst: { repeat: 'both' }, after, count: 3 })).toEqual(['2026-10-25T00:30:00.000Z', '2026-10-25T01:30:00.000Z', '2026-10-26T01:30:00.000Z']);
  });

  // 2026-11-01: New York falls back at 02:00 EDT to 01:00 EST: 02:30 happens once (01:30 twice).
  it('America/New_York repeat: 02:30 is not repeated there, 01:30 is', () => {
    const after = '2026-10-31T12:00:00.000Z';
    expect(slots({ cron: '30 2 * * *', timezone: 'America/New_York', dst: { repeat: 'both' }, after, count: 2 })).toEqual(['2026-11-01T07:30:00.000Z', '2026-11-02T07:30:00.000Z']);
    expect(slots({ cron: '30 1 * * *', timezone: 'America/New_York', after, count: 2 })).toEqual(['2026-11-01T05:30:00.000Z', '2026-11-02T06:30:00.000Z']);
    expect(slots({ cron: '30 1 * * *', timezone: 'America/New_York', dst: { repeat: 'both' }, after, count: 3 })).toEqual(['2026-11-01T05:30:00.000Z', '2026-11-01T06:30:00.000Z', '2026-11-02T06:30:00.000Z']);
  });

  it('keeps slots in order when a repeated hour interleaves them (*/20 with repeat: both)', () => {
    const got = slots({ cron: '*/20 1 * * *', timezone: 'America/New_York', dst: { repeat: 'both' }, after: '2026-11-01T04:00:00.000Z', count: 6 });
    expect(got).toEqual(['2026-11-01T05:00:00.000Z', '2026-11-01T05:20:00.000Z', '2026-11-01T05:40:00.000Z', '2026-11-01T06:00:00.000Z', '2026-11-01T06:20:00.000Z', '2026-11-01T06:40:00.000Z']);
  });
});

describe('every', () => {
  it('PT1H is elapsed time: one hour apart across the spring-forward and fall-back nights', () => {
    for (const [zone, after] of [['America/New_York', '2026-03-08T05:00:00.000Z'], ['Europe/Berlin', '2026-10-24T23:00:00.000Z']] as const) {
      const got = slots({ every: 'PT1H', timezone: zone, after, count: 5 }).map(Date.parse);
      expect(got[0]).toBe(Date.parse(after) + 3_600_000);
      expect(got.slice(1).map((slot, i) => slot - got[i]!)).toEqual([3_600_000, 3_600_000, 3_600_000, 3_600_000]);
    }
  });

  it('P1D keeps the wall-clock time across DST, and the DST policy applies to it', () => {
    const anchor = '2026-03-06T07:30:00.000Z'; // 02:30 EST
    expect(slots({ every: 'P1D', timezone: 'America/New_York', anchor, after: anchor, count: 3 })).toEqual(['2026-03-07T07:30:00.000Z', '2026-03-08T07:30:00.000Z', '2026-03-09T06:30:00.000Z']);
    expect(slots({ every: 'P1D', timezone: 'America/New_York', dst: { gap: 'skip' }, anchor, after: anchor, count: 2 })).toEqual(['2026-03-07T07:30:00.000Z', '2026-03-09T06:30:00.000Z']);
  });
});

describe('invalid rules name their field', () => {
  const fieldOf = (rule: Parameters<typeof checkRule>[0]) => {
    try {
      checkRule(rule);
      return null;
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidScheduleError);
      return (error as InvalidScheduleError).details!.field;
    }
  };
  it.each([
    [{ cron: '61 * * * *', timezone: 'UTC' }, 'cron'],
    [{ cron: '* * *', timezone: 'UTC' }, 'cron'],
    [{ cron: '0 * * * *', timezone: 'Mars/Olympus' }, 'timezone'],
    [{ every: 'P1M', timezone: 'UTC' }, 'every'],
    [{ every: 'P1DT2H', timezone: 'UTC' }, 'every'],
    [{ every: 'PT0S', timezone: 'UTC' }, 'every'],
    [{ timezone: 'UTC' }, 'cron'],
  ])('%j → %s', (rule, field) => expect(fieldOf(rule)).toBe(field));
  it('accepts names, six fields and exact durations', () => {
    for (const rule of [{ cron: '@hourly' }, { cron: '*/5 * * * * *' }, { every: 'PT15M' }, { every: 'P1W' }]) expect(fieldOf({ ...rule, timezone: 'Europe/Berlin' })).toBeNull();
  });
});
