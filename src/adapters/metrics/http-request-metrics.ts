import type { Registry } from 'prom-client';

/** What prom-client's registry reads of a metric when it writes the exposition text. */
interface ExposedValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

interface CountSeries {
  labels: { method: string; route: string; status: string };
  value: number;
}

interface DurationSeries {
  labels: { method: string; route: string };
  /** Observations per bucket (not cumulative); the last slot counts those above every bound. */
  buckets: Float64Array;
  sum: number;
  count: number;
}

/** The series of one method on one route. */
interface MethodSeries {
  duration: DurationSeries;
  byStatus: Map<number, CountSeries>;
}

/**
 * `agentd_http_requests_total` and `agentd_http_request_duration_seconds`, counted with a few map
 * lookups and additions per request. prom-client's Counter and Histogram validate and hash the
 * labels on every observation, even through a bound child (a sizeable share of the server's own
 * cost of a small request); these two keep their series in maps keyed by route,
 * method and status (patterns, methods and statuses: few), and hand prom-client's registry the same values, in the same order, as its
 * Counter and Histogram would: the exposition text is the same, byte for byte.
 */
export class HttpRequestMetrics {
  private readonly byRoute = new Map<string, Map<string, MethodSeries>>();
  /** In the order each series was first observed, as prom-client lists them. */
  private readonly counts: CountSeries[] = [];
  private readonly durations: DurationSeries[] = [];

  constructor(
    registry: Registry,
    private readonly names: { requests: string; duration: string },
    private readonly bounds: readonly number[],
  ) {
    const requests = { name: names.requests, help: 'HTTP requests by route and status', type: 'counter', aggregator: 'sum', get: async () => this.countValues(), reset: () => this.reset() };
    const duration = { name: names.duration, help: 'HTTP request durations by route', type: 'histogram', aggregator: 'sum', get: async () => this.durationValues(), reset: () => this.reset() };
    registry.registerMetric(requests as never);
    registry.registerMetric(duration as never);
  }

  observe(method: string, route: string, status: number, seconds: number): void {
    let byMethod = this.byRoute.get(route);
    if (byMethod === undefined) {
      byMethod = new Map();
      this.byRoute.set(route, byMethod);
    }
    let series = byMethod.get(method);
    if (series === undefined) {
      const duration: DurationSeries = { labels: { method, route }, buckets: new Float64Array(this.bounds.length + 1), sum: 0, count: 0 };
      this.durations.push(duration);
      series = { duration, byStatus: new Map() };
      byMethod.set(method, series);
    }
    let count = series.byStatus.get(status);
    if (count === undefined) {
      count = { labels: { method, route, status: String(status) }, value: 0 };
      this.counts.push(count);
      series.byStatus.set(status, count);
    }
    count.value += 1;
    const duration = series.duration;
    let bucket = 0;
    while (bucket < this.bounds.length && !(seconds <= this.bounds[bucket]!)) bucket++;
    duration.buckets[bucket]! += 1;
    duration.sum += seconds;
    duration.count += 1;
  }

  private reset(): void {
    this.byRoute.clear();
    this.counts.length = 0;
    this.durations.length = 0;
  }

  private countValues() {
    const values: ExposedValue[] = this.counts.map((series) => ({ labels: { ...series.labels }, value: series.value }));
    return { name: this.names.requests, help: 'HTTP requests by route and status', type: 'counter', values, aggregator: 'sum' };
  }

  /** As prom-client's Histogram: per series, cumulative buckets by `le`, `+Inf`, then `_sum` and `_count`. */
  private durationValues() {
    const name = this.names.duration;
    const values: ExposedValue[] = [];
    for (const series of this.durations) {
      let cumulative = 0;
      this.bounds.forEach((bound, index) => {
        cumulative += series.buckets[index]!;
        values.push({ labels: { le: bound, ...series.labels }, value: cumulative, metricName: `${name}_bucket` });
      });
      values.push({ labels: { le: '+Inf', ...series.labels }, value: series.count, metricName: `${name}_bucket` });
      values.push({ labels: { ...series.labels }, value: series.sum, metricName: `${name}_sum` });
      values.push({ labels: { ...series.labels }, value: series.count, metricName: `${name}_count` });
    }
    return { name, help: 'HTTP request durations by route', type: 'histogram', values, aggregator: 'sum' };
  }
}
