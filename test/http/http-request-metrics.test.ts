import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { HttpRequestMetrics } from '../../src/adapters/metrics/http-request-metrics.js';
import { HTTP_DURATION_BUCKETS, Metrics } from '../../src/adapters/metrics/prometheus-metrics.js';

const NAMES = { requests: 'agentd_http_requests_total', duration: 'agentd_http_request_duration_seconds' };

/** The HTTP request metrics as prom-client's own Counter and Histogram kept them before. */
function promClientReference(registry: Registry) {
  const registers = [registry];
  const requests = new Counter({ name: NAMES.requests, help: 'HTTP requests by route and status', labelNames: ['method', 'route', 'status'], registers });
  const duration = new Histogram({ name: NAMES.duration, help: 'HTTP request durations by route', labelNames: ['method', 'route'], buckets: [...HTTP_DURATION_BUCKETS], registers });
  return (method: string, route: string, status: number, seconds: number) => {
    requests.labels({ method, route, status: String(status) }).inc();
    duration.labels({ method, route }).observe(seconds);
  };
}

describe('HTTP request metrics', () => {
  it('write the same exposition text as prom-client\'s Counter and Histogram, byte for byte', async () => {
    const reference = new Registry();
    const observeReference = promClientReference(reference);
    const ours = new Registry();
    const metrics = new HttpRequestMetrics(ours, NAMES, HTTP_DURATION_BUCKETS);
    const routes = ['/alive', '/conversations/:id', 'unmatched', '/odd "quoted" \\ route\nnext'];
    const methods = ['GET', 'POST', 'DELETE'];
    const statuses = [200, 201, 404, 401, 500];
    // Durations on every bound, between them, above the last (only +Inf), and tiny fractions whose sums round.
    const seconds = [0, 0.0001, 0.001, 0.0010001, 0.003, 0.005, 0.01, 0.05, 0.07, 0.1, 0.5, 0.9, 1, 3, 5, 5.0001, 12, 1e-7, 0.1 + 0.2];
    for (let i = 0; i < 2_000; i++) {
      const observation = [methods[(i * 7) % 3]!, routes[(i * 5) % 4]!, statuses[(i * 3) % 5]!, seconds[(i * 11) % seconds.length]!] as const;
      observeReference(...observation);
      metrics.observe(...observation);
    }
    const expected = await reference.metrics();
    expect(expected).toContain('agentd_http_request_duration_seconds_bucket{le="+Inf",method="GET",route="/alive"}');
    expect(await ours.metrics()).toBe(expected);
  });

  it('are empty before the first request, as prom-client\'s are', async () => {
    const reference = new Registry();
    promClientReference(reference);
    const ours = new Registry();
    new HttpRequestMetrics(ours, NAMES, HTTP_DURATION_BUCKETS);
    expect(await ours.metrics()).toBe(await reference.metrics());
  });

  it('sit in the server\'s registry where prom-client\'s did (after the process metrics, before the event counters)', async () => {
    const metrics = new Metrics({ conversationsByStatus: () => ({ idle: 1 }), sseSubscribers: () => 0 });
    metrics.observeRequest('GET', '/alive', 200, 0.002);
    const names = metrics.registry.getMetricsAsArray().map((metric) => metric.name);
    const at = names.indexOf(NAMES.requests);
    expect(names[at + 1]).toBe(NAMES.duration);
    expect(names[at - 1]).toMatch(/^agentd_process_/);
    expect(names[at + 2]).toBe('agentd_events_appended_total');
    const text = await metrics.registry.metrics();
    expect(text).toContain('agentd_http_requests_total{method="GET",route="/alive",status="200"} 1\n');
    expect(text).toContain('agentd_http_request_duration_seconds_bucket{le="0.005",method="GET",route="/alive"} 1\n');
    expect(text).toContain('agentd_http_request_duration_seconds_sum{method="GET",route="/alive"} 0.002\n');
  });
});
