import type { Benchmark } from './support/benchmark.js';

/** A benchmark by id, its module loaded only by the process that runs it (scripts/bench.mjs splits the bundle per module). */
export interface BenchmarkEntry {
  id: string;
  load(): Promise<Benchmark>;
}

/** Every benchmark, in the order `npm run bench` runs them. */
export const BENCHMARKS: readonly BenchmarkEntry[] = [
  { id: 'P1', load: async () => (await import('./p1-agent-step.js')).p1AgentStep },
  { id: 'P2', load: async () => (await import('./p2-sse-fanout.js')).p2SseFanout },
  { id: 'P3', load: async () => (await import('./p3-event-pages.js')).p3EventPages },
  { id: 'P4', load: async () => (await import('./p4-startup.js')).p4Startup },
  { id: 'P5', load: async () => (await import('./p5-http.js')).p5Http },
  { id: 'P6', load: async () => (await import('./p6-shell.js')).p6Shell },
  { id: 'P7', load: async () => (await import('./p7-binary.js')).p7Binary },
  { id: 'P10', load: async () => (await import('./p10-round-trip.js')).p10RoundTrip },
  { id: 'P11', load: async () => (await import('./p11-idle.js')).p11Idle },
  { id: 'P12', load: async () => (await import('./p12-tool-gate.js')).p12ToolGate },
  { id: 'P13', load: async () => (await import('./p13-shutdown.js')).p13Shutdown },
  { id: 'P14', load: async () => (await import('./p14-condensation.js')).p14Condensation },
  { id: 'P15', load: async () => (await import('./p15-concurrency.js')).p15Concurrency },
  { id: 'P16', load: async () => (await import('./p16-soak.js')).p16Soak },
  { id: 'P17', load: async () => (await import('./p17-cluster-log.js')).p17ClusterLog },
  { id: 'P18', load: async () => (await import('./p18-subagents.js')).p18Subagents },
  { id: 'P19', load: async () => (await import('./p19-checkpoint.js')).p19Checkpoint },
  { id: 'P20', load: async () => (await import('./p20-peer.js')).p20Peer },
  { id: 'P21', load: async () => (await import('./p21-condensation-tokens.js')).p21CondensationTokens },
];
