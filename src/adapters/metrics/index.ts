// Prometheus metrics: HTTP requests, events, conversations, the event loop's lag, the cluster's figures.
export { Metrics } from './prometheus-metrics.js';
