import type { Clock } from '../clock.js';
import type { ScheduleRunner } from './schedule-runner.js';
import type { ScheduleStore } from './schedule-store.js';

/**
 * How soon the timer looks again at a schedule that is due but was not fired here (another
 * instance works on it or serves its target), and at conversations to delete once their run ends.
 */
const RETRY_MS = 500;
/** The longest the timer sleeps while a fire is ahead: a wall clock that jumped is caught up with. */
const MAX_SLEEP_MS = 60_000;

/**
 * When the runner ticks: at the next fire of an active schedule, and not at all while there is
 * none, so that an idle server does not wake for schedules (bench P11). A schedule saved anywhere
 * (the store's watch: on PostgreSQL, a notice from any instance) makes it look again.
 */
export class ScheduleTimer {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private started = false;
  /** A look at the next fire is queued: changes meanwhile need no other. */
  private lookQueued = false;
  /** Steps run one after another. */
  private cycle: Promise<void> = Promise.resolve();

  constructor(
    private readonly deps: {
      runner: Pick<ScheduleRunner, 'tick' | 'cleanUpPending'>;
      store: ScheduleStore;
      clock: Clock;
      onError: (error: unknown, context: Record<string, unknown>) => void;
    },
  ) {}

  async start(): Promise<void> {
    await this.deps.store.watch(() => this.wake());
    this.started = true;
    await this.step(false);
  }

  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.cycle;
  }

  private wake(): void {
    if (!this.started || this.stopped || this.lookQueued) return;
    this.lookQueued = true;
    void this.step(false);
  }

  /** A tick (when `tick`), then the sleep until the next fire. */
  private step(tick: boolean): Promise<void> {
    this.cycle = this.cycle
      .then(async () => {
        if (!tick) this.lookQueued = false;
        if (this.stopped) return;
        if (tick) await this.deps.runner.tick().catch((error: unknown) => this.deps.onError(error, {}));
        if (!this.stopped) await this.sleep(tick);
      })
      .catch((error: unknown) => this.deps.onError(error, {}));
    return this.cycle;
  }

  private async sleep(ticked: boolean): Promise<void> {
    const { clock } = this.deps;
    const at = await this.deps.store.nextWake().catch((error: unknown) => {
      this.deps.onError(error, {});
      return clock.now();
    });
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    const ahead = at === null ? null : at - clock.now();
    // Due already: fired now, or, right after a tick that left it to another instance, looked at again shortly.
    let delay = ahead === null ? null : ahead > 0 ? Math.min(ahead, MAX_SLEEP_MS) : ticked ? RETRY_MS : 0;
    if (this.deps.runner.cleanUpPending) delay = Math.min(delay ?? RETRY_MS, RETRY_MS);
    if (delay !== null) this.timer = setTimeout(() => void this.step(true), delay);
  }
}
