/**
 * Wall-clock times in an IANA time zone, and the instants they name: none in a DST gap, two in
 * a repeated hour. Schedules read the zone's rules from the runtime's Intl data.
 */
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timeZone: string): Intl.DateTimeFormat {
  let format = formatters.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' });
    formatters.set(timeZone, format);
  }
  return format;
}

/** Whether the runtime knows the zone (an IANA name such as `Europe/Berlin`, or `UTC`). */
export function isKnownTimeZone(timeZone: string): boolean {
  try {
    formatter(timeZone);
    return true;
  } catch {
    return false;
  }
}

/** The zone's offset from UTC at an instant, in ms (east positive). */
export function offsetAt(timeZone: string, instant: number): number {
  const parts: Record<string, number> = {};
  for (const part of formatter(timeZone).formatToParts(new Date(instant))) if (part.type !== 'literal') parts[part.type] = Number(part.value);
  const wall = Date.UTC(parts.year!, parts.month! - 1, parts.day!, parts.hour!, parts.minute!, parts.second!);
  return wall - (instant - (instant % 1000 + 1000) % 1000);
}

/** The wall-clock time at an instant, written as if it were UTC ("naive" local time, in ms). */
export function wallClockAt(timeZone: string, instant: number): number {
  return instant + offsetAt(timeZone, instant);
}

/**
 * The instants a wall-clock time names, oldest first: one usually, none inside a DST gap, two
 * inside a repeated hour. Offsets change at most a day apart, so the offsets a day before and a
 * day after are the only candidates.
 */
export function instantsOf(timeZone: string, wall: number): number[] {
  const day = 86_400_000;
  const candidates = new Set([offsetAt(timeZone, wall - day), offsetAt(timeZone, wall + day)]);
  const found = [...candidates].map((offset) => wall - offset).filter((instant) => wallClockAt(timeZone, instant) === wall);
  return [...new Set(found)].sort((a, b) => a - b);
}

/** Where a wall-clock time inside a DST gap lands when shifted: read with the offset in force before the gap (02:30 becomes 03:30). */
export function shiftedOutOfGap(timeZone: string, wall: number): number {
  return wall - offsetAt(timeZone, wall - 86_400_000);
}
