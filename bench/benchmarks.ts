import type { Benchmark } from './support/benchmark.js';
import { p1AgentStep } from './p1-agent-step.js';
import { p2SseFanout } from './p2-sse-fanout.js';
import { p3EventPages } from './p3-event-pages.js';
import { p4Startup } from './p4-startup.js';
import { p5Http } from './p5-http.js';
import { p6Shell } from './p6-shell.js';
import { p7Binary } from './p7-binary.js';
import { p10RoundTrip } from './p10-round-trip.js';
import { p11Idle } from './p11-idle.js';
import { p12ToolGate } from './p12-tool-gate.js';
import { p13Shutdown } from './p13-shutdown.js';
import { p14Condensation } from './p14-condensation.js';
import { p15Concurrency } from './p15-concurrency.js';
import { p16Soak } from './p16-soak.js';
import { p17ClusterLog } from './p17-cluster-log.js';
import { p18Subagents } from './p18-subagents.js';
import { p19Checkpoint } from './p19-checkpoint.js';

/** Every benchmark, in the order `npm run bench` runs them. */
export const BENCHMARKS: readonly Benchmark[] = [p1AgentStep, p2SseFanout, p3EventPages, p4Startup, p5Http, p6Shell, p7Binary, p10RoundTrip, p11Idle, p12ToolGate, p13Shutdown, p14Condensation, p15Concurrency, p16Soak, p17ClusterLog, p18Subagents, p19Checkpoint];
