/** Time as core sees it: injectable so tests (and retry schedules) need not wait for real time. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** ISO 8601 UTC with milliseconds, as the contract requires. */
export function isoTimestamp(ms: number): string {
  return new Date(ms).toISOString();
}
