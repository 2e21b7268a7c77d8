import type { Clock } from '../clock.js';

/** Time, timers and randomness for delivery workers: injectable so retry schedules can be tested fast. */
export interface Scheduler extends Clock {
  /** Call `callback` after `ms`; the returned function cancels it. */
  setTimer(callback: () => void, ms: number): () => void;
  /** A number in [0, 1), for jitter. */
  random(): number;
}

export const systemScheduler: Scheduler = {
  now: () => Date.now(),
  setTimer(callback, ms) {
    const timer = setTimeout(callback, Math.max(0, ms));
    timer.unref();
    return () => clearTimeout(timer);
  },
  random: () => Math.random(),
};
