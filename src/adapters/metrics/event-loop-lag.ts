import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

/** Node's sampling period (prom-client's default `eventLoopMonitoringPrecision`). */
const RESOLUTION_MS = 10;
/**
 * Sampling stops between one and two of these after the last work arrived: work that comes more
 * often is sampled throughout; a load balancer's probe every few seconds costs a few samples.
 */
export const LAG_IDLE_MS = 100;

/** The figures prom-client reports as `nodejs_eventloop_lag_<figure>_seconds`, in its order. */
export const LAG_FIGURES = ['min', 'max', 'mean', 'stddev', 'p50', 'p90', 'p99'] as const;
export type LagFigures = Record<(typeof LAG_FIGURES)[number], number>;

/**
 * The event loop's delay, sampled by Node's monitor (a timer firing every 10 ms) only while the
 * server has work: from the arrival of a request or an event until, at most, twice LAG_IDLE_MS
 * after the last one (a check every LAG_IDLE_MS while sampling). The monitor always on, as
 * prom-client's default metrics keep it, woke an idle server a hundred times a second (CPU that
 * P11's empty server should not spend) to measure a loop with nothing to delay.
 *
 * The first sample after work arrives on an idle server is the monitor's starting point: a stall
 * in that very first turn is in the request's own duration, not here. Any stall while the server
 * is busy is.
 */
export class EventLoopLag {
  private readonly histogram: IntervalHistogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  private sampling = false;
  /** Work arrived since the last check. */
  private recent = false;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly idleMs = LAG_IDLE_MS) {}

  /** Work arrived: sample from now on, until the server has had none for a while. Cheap enough for every request. */
  busy(): void {
    if (this.recent) return;
    this.recent = true;
    if (this.sampling) return;
    this.sampling = true;
    this.histogram.enable();
    this.timer = setInterval(() => this.check(), this.idleMs);
    this.timer.unref();
  }

  /** Whether Node's monitor is running (tests). */
  get isSampling(): boolean {
    return this.sampling;
  }

  /**
   * The figures in seconds since the last read, then a fresh start (as prom-client's collector
   * reads them at each scrape); zeros when nothing was sampled: an idle loop delayed nothing.
   */
  read(): LagFigures {
    const { histogram } = this;
    const sampled = histogram.count > 0;
    const seconds = (nanoseconds: number) => (sampled ? nanoseconds / 1e9 : 0);
    const figures: LagFigures = {
      min: seconds(histogram.min),
      max: seconds(histogram.max),
      mean: seconds(histogram.mean),
      stddev: seconds(histogram.stddev),
      p50: seconds(histogram.percentile(50)),
      p90: seconds(histogram.percentile(90)),
      p99: seconds(histogram.percentile(99)),
    };
    histogram.reset();
    return figures;
  }

  /** The server stops: no timer left behind. */
  stop(): void {
    if (this.sampling) this.pause();
  }

  private check(): void {
    if (this.recent) {
      this.recent = false;
      return;
    }
    this.pause();
  }

  private pause(): void {
    this.histogram.disable();
    this.sampling = false;
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
