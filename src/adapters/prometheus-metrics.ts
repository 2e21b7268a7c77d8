import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { AgentEvent } from '../core/schemas/event.js';

/**
 * The server's Prometheus metrics. Most are derived from the event stream (runs from
 * state_update, tokens from usage, tools from observation), so the agent loop needs no
 * metrics calls of its own; gauges are read from the services when scraped.
 */
export class Metrics {
  readonly registry = new Registry();
  private readonly httpRequests: Counter<'method' | 'route' | 'status'>;
  private readonly httpDuration: Histogram<'method' | 'route'>;
  private readonly eventsAppended: Counter<'kind'>;
  private readonly runsStarted: Counter;
  private readonly runsEnded: Counter<'outcome'>;
  private readonly llmTokens: Counter<'type'>;
  private readonly llmCost: Counter;
  private readonly llmErrors: Counter<'code'>;
  private readonly toolExecutions: Counter<'tool' | 'outcome'>;
  readonly webhookDeliveries: Counter<'outcome'>;

  constructor(gauges: { conversationsByStatus: () => Record<string, number>; sseSubscribers: () => number }) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: 'agentd_process_' });
    this.httpRequests = new Counter({ name: 'agentd_http_requests_total', help: 'HTTP requests by route and status', labelNames: ['method', 'route', 'status'], registers });
    this.httpDuration = new Histogram({
      name: 'agentd_http_request_duration_seconds',
      help: 'HTTP request durations by route',
      labelNames: ['method', 'route'],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5],
      registers,
    });
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
  }

  observeEvent(event: AgentEvent): void {
    this.eventsAppended.inc({ kind: event.kind });
    switch (event.kind) {
      case 'state_update':
        if (event.status === 'running') this.runsStarted.inc();
        else if (event.run_id) this.runsEnded.inc({ outcome: event.status });
        return;
      case 'usage':
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

  observeRequest(options: { method: string; route: string; status: number; seconds: number }): void {
    this.httpRequests.inc({ method: options.method, route: options.route, status: String(options.status) });
    this.httpDuration.observe({ method: options.method, route: options.route }, options.seconds);
  }
}
