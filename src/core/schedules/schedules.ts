import type { Clock } from '../clock.js';
import { ScheduleRunner } from './schedule-runner.js';
import { ScheduleService } from './schedule-service.js';
import type { ScheduleStore } from './schedule-store.js';
import { ScheduleTargets, type ScheduleTargetsDeps } from './schedule-targets.js';
import { ScheduleTimer } from './schedule-timer.js';

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
  const { store, clock, onError } = options;
  const targets = new ScheduleTargets(options.deps);
  const runner = new ScheduleRunner({ store, targets, clock, owner: options.owner, onError, ...(options.leaseMs && { leaseMs: options.leaseMs }), ...(options.pausePoint && { pausePoint: options.pausePoint }), ...(options.servesHere && { servesHere: options.servesHere }) });
  const service = new ScheduleService({ store, runner, targets, clock, defaultTimezone: options.timezone });
  const timer = new ScheduleTimer({ runner, store, clock, onError });
  return {
    service,
    runner,
    async start() {
      await runner.recover();
      await timer.start();
    },
    close: () => timer.close(),
  };
}
