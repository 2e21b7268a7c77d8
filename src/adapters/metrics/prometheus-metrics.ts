import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { AgentEvent } from '../../core/schemas/event.js';
import { HttpRequestMetrics } from './http-request-metrics.js';
import { EventLoopLag, LAG_FIGURES, type LagFigures } from './event-loop-lag.js';

export interface ClusterFigures {
  leasesHeld(): number;
  instancesLive(): Promise<number>;
  takeovers(): number;
  failovers(): number;
  leasesLost(): number;
  forwarded(): number;
  deadInstances(): number;
  barrierTimeouts(): number;
  resyncs(): number;
  tailPosition(): number;
  tailLag(): Promise<number>;
  deliveredInline(): number;
  deliveredRead(): number;
  publishFailures(): number;
  pendingWrites(): number;
}

const PROCESS_PREFIX = 'agentd_process_';
/** prom-client's own event-loop monitor samples once in this long (the longest a timer takes, ~25 days): its figures are replaced by EventLoopLag's. */
const NEVER_MS = 2 ** 31 - 1;

/** prom-client's help and aggregation of each event-loop figure (lib/metrics/eventLoopLag.js). */
const LAG_GAUGES: Record<keyof LagFigures, { help: string; aggregator: 'min' | 'max' | 'average' }> = {
  min: { help: 'The minimum recorded event loop delay.', aggregator: 'min' },
  max: { help: 'The maximum recorded event loop delay.', aggregator: 'max' },
  mean: { help: 'The mean of the recorded event loop delays.', aggregator: 'average' },
  stddev: { help: 'The standard deviation of the recorded event loop delays.', aggregator: 'average' },
  p50: { help: 'The 50th percentile of the recorded event loop delays.', aggregator: 'average' },
  p90: { help: 'The 90th percentile of the recorded event loop delays.', aggregator: 'average' },
  p99: { help: 'The 99th percentile of the recorded event loop delays.', aggregator: 'average' },
};

/** Upper bounds of `agentd_http_request_duration_seconds`, in seconds. */
export const HTTP_DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5] as const;

/**
 * The server's Prometheus metrics. Most are derived from the event stream (runs from
 * state_update, tokens from usage, tools from observation), so the agent loop needs no
 * metrics calls of its own; gauges are read from the services when scraped.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly http: HttpRequestMetrics;
  private readonly eventsAppended: Counter<'kind'>;
  private readonly runsStarted: Counter;
  private readonly runsEnded: Counter<'outcome'>;
  private readonly llmTokens: Counter<'type'>;
  private readonly llmCost: Counter;
  private readonly llmErrors: Counter<'code'>;
  private readonly toolExecutions: Counter<'tool' | 'outcome'>;
  readonly webhookDeliveries: Counter<'outcome'>;
  private readonly lag: EventLoopLag;

  constructor(gauges: { conversationsByStatus: () => Record<string, number>; sseSubscribers: () => number; historyCache?: () => { bytes: number; released: number } }) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: PROCESS_PREFIX, eventLoopMonitoringPrecision: NEVER_MS });
    this.lag = new EventLoopLag();
    this.replaceLagFigures();
    // Written as prom-client's Counter and Histogram write them, counted more cheaply (once per request).
    this.http = new HttpRequestMetrics(this.registry, { requests: 'agentd_http_requests_total', duration: 'agentd_http_request_duration_seconds' }, HTTP_DURATION_BUCKETS);
    this.eventsAppended = new Counter({ name: 'agentd_events_appended_total', help: 'Events appended to the durable log, by kind', labelNames: ['kind'], registers });
    this.runsStarted = new Counter({ name: 'agentd_runs_started_total', help: 'Agent runs started', registers });
    this.runsEnded = new Counter({ name: 'agentd_runs_ended_total', help: 'Agent runs ended, by the status they left the conversation in', labelNames: ['outcome'], registers });
    this.llmTokens = new Counter({ name: 'agentd_llm_tokens_total', help: 'LLM tokens, by type', labelNames: ['type'], registers });
    this.llmCost = new Counter({ name: 'agentd_llm_cost_total', help: 'LLM cost, in the configured currency units', registers });
    this.llmErrors = new Counter({ name: 'agentd_llm_errors_total', help: 'LLM failures after retries, by code', labelNames: ['code'], registers });
    this.toolExecutions = new Counter({ name: 'agentd_tool_executions_total', help: 'Tool executions by tool and outcome', labelNames: ['tool', 'outcome'], registers });
    this.webhookDeliveries = new Counter({ name: 'agentd_webhook_deliveries_total', help: 'Webhook delivery attempts by outcome', labelNames: ['outcome'], registers });
    new Gauge({
      name: 'agentd_conversations',
      help: 'Conversations by status',
      labelNames: ['status'],
      registers,
      collect() {
        for (const [status, count] of Object.entries(gauges.conversationsByStatus())) this.set({ status }, count);
      },
    });
    new Gauge({
      name: 'agentd_sse_subscribers',
      help: 'Open SSE streams',
      registers,
      collect() {
        this.set(gauges.sseSubscribers());
      },
    });
    const historyCache = gauges.historyCache;
    if (!historyCache) return;
    new Gauge({
      name: 'agentd_history_cache_bytes',
      help: 'LLM histories kept in memory, in bytes as counted against AGENTD_HISTORY_CACHE_MB',
      registers,
      collect() {
        this.set(historyCache().bytes);
      },
    });
    // Only grows while the process lives, like a counter, but kept by the sessions.
    new Gauge({
      name: 'agentd_history_cache_released_total',
      help: 'LLM histories dropped to stay within AGENTD_HISTORY_CACHE_MB (folded from the event log again at next use)',
      registers,
      collect() {
        this.set(historyCache().released);
      },
    });
  }

  /**
   * Several instances: figures read when scraped. Gauges that count (takeovers, forwarded
   * requests…) only grow while the process lives, like counters, but are kept by their owners.
   */
  addCluster(source: ClusterFigures): void {
    const registers = [this.registry];
    const gauge = (name: string, help: string, read: () => number | Promise<number>) =>
      new Gauge({
        name,
        help,
        registers,
        async collect() {
          this.set(await read());
        },
      });
    gauge('agentd_cluster_leases_held', 'Conversations this instance holds the lease of (runs here)', source.leasesHeld);
    gauge('agentd_cluster_instances_live', 'Instances whose heartbeat is fresh', source.instancesLive);
    gauge('agentd_cluster_takeovers_total', 'Leases this instance took (new conversations excluded)', source.takeovers);
    gauge('agentd_cluster_failovers_total', 'Runs this instance recovered after their instance died', source.failovers);
    gauge('agentd_cluster_leases_lost_total', 'Leases this instance lost to another (it stalled past their expiry)', source.leasesLost);
    gauge('agentd_cluster_forwarded_requests_total', 'Requests forwarded to the instance holding the conversation', source.forwarded);
    gauge('agentd_cluster_dead_instances_total', 'Instances this instance found dead (silent, nothing listening at their address) and took leases from at once', source.deadInstances);
    gauge('agentd_replication_barrier_timeouts_total', 'List requests served before this instance caught up with the database (barrier gave up after 2 s)', source.barrierTimeouts);
    gauge('agentd_replication_resyncs_total', 'Full reads of the conversation records after the connection listening for their changes was lost', source.resyncs);
    gauge('agentd_replication_tail_position', 'Last firehose position this instance delivered to its subscribers', source.tailPosition);
    gauge('agentd_replication_lag_events', 'Events committed to the database this instance has not delivered yet', source.tailLag);
    gauge('agentd_replication_inline_total', 'Events delivered from the feed message itself (no database read)', source.deliveredInline);
    gauge('agentd_replication_read_total', 'Events delivered by reading the database (gaps, bare notices, polls)', source.deliveredRead);
    gauge('agentd_replication_publish_failures_total', 'Feed publications that failed (the poll catches up)', source.publishFailures);
    gauge('agentd_storage_pending_writes', 'Record writes queued for the database', source.pendingWrites);
  }

  /**
   * prom-client's `nodejs_eventloop_lag_{min,…,p99}_seconds`, same names and help, read from
   * EventLoopLag: its collector's own monitor never samples (NEVER_MS). The first figure's
   * collect reads them all, as prom-client's does; `nodejs_eventloop_lag_seconds` (a
   * setImmediate timed at each scrape) stays prom-client's.
   */
  private replaceLagFigures(): void {
    const registers = [this.registry];
    const gauges = new Map<keyof LagFigures, Gauge>();
    const collect = () => {
      const figures = this.lag.read();
      for (const [figure, gauge] of gauges) gauge.set(figures[figure]);
    };
    for (const figure of LAG_FIGURES) {
      const name = `${PROCESS_PREFIX}nodejs_eventloop_lag_${figure}_seconds`;
      this.registry.removeSingleMetric(name);
      const { help, aggregator } = LAG_GAUGES[figure];
      gauges.set(figure, new Gauge({ name, help, registers, aggregator, ...(figure === LAG_FIGURES[0] && { collect }) }));
    }
  }

  observeEvent(event: AgentEvent): void {
    this.lag.busy();
    this.eventsAppended.inc({ kind: event.kind });
    switch (event.kind) {
      case 'state_update':
        if (event.status === 'running') this.runsStarted.inc();
        else if (event.run_id) this.runsEnded.inc({ outcome: event.status });
        return;
      case 'usage':
        if (event.prompt_tokens === null || event.completion_tokens === null || event.cost === null) return; // unknown: nothing to count
        this.llmTokens.inc({ type: 'prompt' }, event.prompt_tokens);
        this.llmTokens.inc({ type: 'completion' }, event.completion_tokens);
        this.llmCost.inc(event.cost);
        return;
      case 'agent_error':
        if (event.error.startsWith('llm_')) this.llmErrors.inc({ code: event.error });
        return;
      case 'observation':
        this.toolExecutions.inc({ tool: event.tool_name, outcome: event.is_error ? 'error' : 'ok' });
        return;
      default:
        return;
    }
  }

  /** A request arrived (the loop's delay is sampled while the server has work, event-loop-lag.ts). */
  requestArrived(): void {
    this.lag.busy();
  }

  /** The server stops. */
  stop(): void {
    this.lag.stop();
  }

  /** One HTTP request answered: `route` is its pattern (`/conversations/:id`), `unmatched` when none. */
  observeRequest(method: string, route: string, status: number, seconds: number): void {
    this.http.observe(method, route, status, seconds);
  }
}
