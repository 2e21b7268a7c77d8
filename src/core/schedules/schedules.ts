import type { Clock } from '../clock.js';
import { ScheduleRunner } from './schedule-runner.js';
import { ScheduleService } from './schedule-service.js';
import type { ScheduleStore } from './schedule-store.js';
import { ScheduleTargets, type ScheduleTargetsDeps } from './schedule-targets.js';

/** How often the timer looks for due schedules: slots are whole seconds, and other instances may add schedules. */
const POLL_MS = 500;

export interface Schedules {
  service: ScheduleService;
  runner: ScheduleRunner;
  /** Finishes fires a crash left claimed, then ticks on a timer. */
  start(): Promise<void>;
  close(): Promise<void>;
}

/** Schedules: the service the routes call and the timer that fires them (time read from `clock`). */
export function createSchedules(options: {
  timezone: string;
  clock: Clock;
  store: ScheduleStore;
  owner: string;
  leaseMs?: number;
  deps: ScheduleTargetsDeps;
  pausePoint?: ((point: string) => Promise<void>) | undefined;
  /** Several instances: see ScheduleRunnerDeps.servesHere. */
  servesHere?: (conversationId: string) => Promise<boolean>;
  onError: (error: unknown, context: Record<string, unknown>) => void;
}): Schedules {
  const targets = new ScheduleTargets(options.deps);
  // One instance sleeps while it has no active schedule (an idle server does not poll, bench P11),
  // and wakes when one is made or changed; instances sharing PostgreSQL poll, as another may add one.
  const alone = options.servesHere === undefined;
  const wake = () => {
    if (stopped || !started || timer !== undefined) return;
    timer = setTimeout(loop, POLL_MS);
  };
  const runner = new ScheduleRunner({ store: options.store, targets, clock: options.clock, owner: options.owner, onError: options.onError, onChange: wake, ...(options.leaseMs && { leaseMs: options.leaseMs }), ...(options.pausePoint && { pausePoint: options.pausePoint }), ...(options.servesHere && { servesHere: options.servesHere }) });
  const service = new ScheduleService({ store: options.store, runner, targets, clock: options.clock, defaultTimezone: options.timezone });
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let started = false;
  let running: Promise<void> = Promise.resolve();
  /** Whether the timer has anything to look at: alone, an active schedule. */
  const worthPolling = async () => !alone || (await options.store.list({ status: 'active', limit: 1 })).length > 0;
  const loop = () => {
    timer = undefined;
    if (stopped) return;
    running = runner.tick().catch((error: unknown) => options.onError(error, {}));
    void running
      .then(() => worthPolling())
      .catch(() => true)
      .then((again) => {
        if (!stopped && again && timer === undefined) timer = setTimeout(loop, POLL_MS);
      });
  };
  return {
    service,
    runner,
    async start() {
      await runner.recover();
      started = true;
      if (await worthPolling()) wake();
    },
    async close() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
      await running;
    },
  };
}
