import { createHash } from 'node:crypto';
import { isoTimestamp } from '../clock.js';
import type { Schedule } from './schedule-schemas.js';
import type { ScheduleState } from './schedule-store.js';
import { slotsAfter, takeSlots, type SlotRule } from './schedule-times.js';

/** More slots than this in one look (a second-by-second schedule after a long outage) are worked through over several ticks. */
const MAX_SLOTS_PER_LOOK = 5_000;

/** A fire's id: a UUID (version 5 layout) hashed from the schedule and the slot, the same on every instance. */
export function fireIdOf(scheduleId: string, slot: number): string {
  const hash = createHash('sha1').update(`agentd schedule fire\n${scheduleId}\n${isoTimestamp(slot)}`).digest();
  hash[6] = (hash[6]! & 0x0f) | 0x50;
  hash[8] = (hash[8]! & 0x3f) | 0x80;
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** How long after its slot a fire starts: fixed per slot (read from its id), below `jitter_s`. */
export function jitterOf(schedule: Pick<Schedule, 'id' | 'jitter_s'>, slot: number): number {
  if (schedule.jitter_s <= 0) return 0;
  return Number.parseInt(fireIdOf(schedule.id, slot).slice(0, 8), 16) % (schedule.jitter_s * 1000);
}

export function ruleOf(schedule: Schedule): SlotRule {
  return { cron: schedule.cron, every: schedule.every, timezone: schedule.timezone, dst: schedule.dst, anchor: Date.parse(schedule.start_at ?? schedule.created_at) };
}

/** Slots are looked for after the cursor, and never before `start_at`. */
function lookAfter(schedule: Schedule, state: ScheduleState): number {
  return schedule.start_at ? Math.max(state.cursor, Date.parse(schedule.start_at) - 1) : state.cursor;
}

const endOf = (schedule: Schedule) => (schedule.end_at ? Date.parse(schedule.end_at) : Infinity);

/** What a tick does with a schedule: the due slots to fire and those to record missed (catch-up), and the new cursor. */
export interface DuePlan {
  fire: number[];
  missed: number[];
  /** Set when slots before the catch-up window were too many to record one by one: the oldest of them, standing for all. */
  missedFrom: { slot: number; until: number } | null;
  cursor: number;
  /** More due slots than one look takes: look again at once. */
  more: boolean;
}

/** Slots missed before the catch-up window are recorded one by one up to this many (an outage of a second-by-second schedule is not). */
const MAX_MISSED_RECORDS = 100;

export function planDue(schedule: Schedule, state: ScheduleState, now: number): DuePlan {
  const rule = ruleOf(schedule);
  const windowStart = Math.max(now - schedule.catchup.window_s * 1000, lookAfter(schedule, state));
  // Before the window: missed whatever happens. Many are summed up in one record, and not enumerated.
  const before = takeSlots(rule, lookAfter(schedule, state), { count: MAX_MISSED_RECORDS + 1, until: Math.min(windowStart, endOf(schedule)) });
  const missedFrom = before.length > MAX_MISSED_RECORDS ? { slot: before[0]!, until: windowStart } : null;
  const missed = missedFrom ? [] : before;
  const due: number[] = [];
  let more = false;
  for (const slot of slotsAfter(rule, missedFrom ? windowStart : Math.max(windowStart, before[before.length - 1] ?? -Infinity))) {
    if (slot > endOf(schedule) || slot + jitterOf(schedule, slot) > now) break;
    if (due.length === MAX_SLOTS_PER_LOOK) {
      more = true;
      break;
    }
    due.push(slot);
  }
  const left = schedule.max_fires === null ? Infinity : Math.max(0, schedule.max_fires - schedule.fires_count);
  const take = more ? 0 : Math.min(schedule.catchup.max, left);
  const fire = due.slice(Math.max(0, due.length - take));
  missed.push(...due.slice(0, due.length - fire.length));
  const last = due[due.length - 1] ?? (missedFrom ? windowStart : before[before.length - 1]);
  return { fire, missed, missedFrom, cursor: last === undefined ? state.cursor : Math.max(last, state.cursor), more };
}

/** When the next slot after the cursor fires (its jitter included), or null when none will. */
export function nextFireAt(schedule: Schedule, state: ScheduleState): string | null {
  if (schedule.status !== 'active') return null;
  if (schedule.max_fires !== null && schedule.fires_count >= schedule.max_fires) return null;
  for (const slot of slotsAfter(ruleOf(schedule), lookAfter(schedule, state))) {
    if (slot > endOf(schedule)) return null;
    return isoTimestamp(slot + jitterOf(schedule, slot));
  }
  return null;
}

/** Why an active schedule is over, if it is: its `end_at` is behind it, or it fired `max_fires` times. */
export function completion(schedule: Schedule, state: ScheduleState): 'end_at' | 'max_fires' | null {
  if (schedule.max_fires !== null && schedule.fires_count >= schedule.max_fires) return 'max_fires';
  if (schedule.end_at && nextFireAt({ ...schedule, status: 'active' }, state) === null) return 'end_at';
  return null;
}
