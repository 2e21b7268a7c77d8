import { Cron } from 'croner';
import { instantsOf, isKnownTimeZone, offsetAt, shiftedOutOfGap, wallClockAt } from './zone-offsets.js';
import { InvalidScheduleError } from './invalid-schedule-error.js';

/** What a wall-clock slot that falls in a DST gap or a repeated hour does. */
export interface DstPolicy {
  /** `shift`: a time the clocks skip (02:30 on a spring-forward night) fires an hour later, at 03:30; `skip`: not that day. */
  gap: 'shift' | 'skip';
  /** `once`: a time that happens twice (01:30 on a fall-back night) fires the first time only; `both`: twice. */
  repeat: 'once' | 'both';
}

/** When a schedule's slots fall: a cron pattern or an ISO 8601 duration, read in a time zone. */
export interface SlotRule {
  cron?: string | null | undefined;
  every?: string | null | undefined;
  timezone: string;
  dst: DstPolicy;
  /** Where `every` counts from (the schedule's `start_at`, else its creation). */
  anchor: number;
}

const DAY = 86_400_000;

/** A parsed `every`: an exact elapsed time (hours, minutes, seconds) or whole calendar days in the time zone. */
type Every = { kind: 'elapsed'; ms: number } | { kind: 'days'; days: number };

/**
 * ISO 8601 durations limited to what is exact: weeks and days (calendar days in the schedule's
 * time zone, the same wall-clock time each day), or hours, minutes and seconds (elapsed time,
 * unaffected by DST). Years and months have no fixed length and are refused (a cron pattern says
 * them exactly); so is a mix of days and hours, which would be neither.
 */
export function parseEvery(text: string): Every {
  const match = /^P(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?)?$/.exec(text);
  if (!match || text === 'P' || text.endsWith('T')) {
    const reason = /^P.*\d+[YM].*$/.test(text.split('T')[0] ?? '') ? 'years and months have no fixed length: use a cron pattern (e.g. `0 9 1 * *` monthly)' : 'not an ISO 8601 duration such as PT1H, PT15M, P1D or P1W';
    throw new InvalidScheduleError('every', `${reason}`);
  }
  const [weeks, days, hours, minutes, seconds] = match.slice(1).map((part) => Number(part ?? 0)) as [number, number, number, number, number];
  const calendarDays = weeks * 7 + days;
  const elapsed = ((hours * 60 + minutes) * 60 + seconds) * 1000;
  if (calendarDays > 0 && elapsed > 0) throw new InvalidScheduleError('every', 'mixes days and hours: use whole days (P1D, same wall-clock time) or an elapsed time (PT36H)');
  if (calendarDays > 0) return { kind: 'days', days: calendarDays };
  if (elapsed < 1000) throw new InvalidScheduleError('every', 'must be at least one second (PT1S)');
  return { kind: 'elapsed', ms: elapsed };
}

/** A cron pattern (5 or 6 fields, or a name such as `@hourly`) matched against wall-clock time; throws InvalidScheduleError naming `cron`. */
export function parseCron(pattern: string): Cron {
  const fields = pattern.trim().split(/\s+/);
  if (!pattern.trim().startsWith('@') && (fields.length < 5 || fields.length > 6)) throw new InvalidScheduleError('cron', `has ${fields.length} field(s): give 5 (minute hour day month weekday), 6 (with seconds first) or a name such as @hourly`);
  try {
    // Wall-clock times are written as UTC instants ("naive"): the zone and DST are applied after, explicitly.
    return new Cron(pattern, { timezone: 'Etc/UTC', paused: true, legacyMode: true });
  } catch (error) {
    throw new InvalidScheduleError('cron', (error as Error).message.replace(/^CronPattern: /, ''));
  }
}

/** Checks a rule's fields, throwing InvalidScheduleError that names the field at fault. */
export function checkRule(rule: Pick<SlotRule, 'cron' | 'every' | 'timezone'>): void {
  if (Boolean(rule.cron) === Boolean(rule.every)) throw new InvalidScheduleError(rule.cron ? 'every' : 'cron', 'give exactly one of `cron` and `every`');
  if (!isKnownTimeZone(rule.timezone)) throw new InvalidScheduleError('timezone', `"${rule.timezone}" is not an IANA time zone (e.g. Europe/Berlin, America/New_York, UTC)`);
  if (rule.cron) parseCron(rule.cron);
  if (rule.every) parseEvery(rule.every);
}

/** The rule's slots strictly after `after`, oldest first (endless for most rules: take what you need). */
export function* slotsAfter(rule: SlotRule, after: number): Generator<number> {
  if (rule.every) {
    const every = parseEvery(rule.every);
    if (every.kind === 'elapsed') {
      for (let k = Math.max(0, Math.floor((after - rule.anchor) / every.ms) + 1); ; k++) yield rule.anchor + k * every.ms;
    }
    const anchorWall = wallClockAt(rule.timezone, rule.anchor);
    const step = every.days * DAY;
    yield* fromWallClock(rule, after, (wall) => anchorWall + Math.max(0, Math.floor((wall - anchorWall) / step) + 1) * step);
    return;
  }
  const cron = parseCron(rule.cron!);
  yield* fromWallClock(rule, after, (wall) => cron.nextRun(new Date(wall))?.getTime() ?? null);
}

/**
 * Instants from wall-clock matches, with the DST policy applied: a match in a gap is shifted or
 * skipped, one in a repeated hour fires once or twice. Instants of nearby matches can interleave
 * around a repeated hour, so each is held until no later match can come before it.
 */
function* fromWallClock(rule: SlotRule, after: number, nextWall: (wall: number) => number | null): Generator<number> {
  const zone = rule.timezone;
  const held: number[] = [];
  let last = -Infinity;
  // Start early enough that a match whose instant is after `after` is not missed: by as much as the
  // offset changes within a day of it (a DST change), and no earlier, so that a rule firing every
  // second does not walk through hours of matches before the first one that counts.
  const spread = Math.abs(offsetAt(zone, after - DAY) - offsetAt(zone, after + DAY));
  let wall: number | null = wallClockAt(zone, after) - spread - 1000;
  while ((wall = nextWall(wall)) !== null) {
    const instants = instantsOf(zone, wall);
    const chosen = instants.length === 0 ? (rule.dst.gap === 'shift' ? [shiftedOutOfGap(zone, wall)] : []) : rule.dst.repeat === 'both' ? instants : instants.slice(0, 1);
    for (const instant of chosen) if (instant > after && !held.includes(instant)) held.push(instant);
    held.sort((a, b) => a - b);
    const safe = wall - Math.max(offsetAt(zone, wall - DAY), offsetAt(zone, wall + DAY));
    while (held.length > 0 && held[0]! <= safe) {
      const instant = held.shift()!;
      if (instant > last) yield (last = instant);
    }
  }
  for (const instant of held) if (instant > last) yield (last = instant);
}

/** Up to `count` slots after `after`, within `until` when given. */
export function takeSlots(rule: SlotRule, after: number, options: { count: number; until?: number | null }): number[] {
  const slots: number[] = [];
  if (options.count <= 0) return slots;
  for (const slot of slotsAfter(rule, after)) {
    if (options.until != null && slot > options.until) break;
    slots.push(slot);
    if (slots.length >= options.count) break;
  }
  return slots;
}
