// PERF: the Node options the server runs with, wherever it is started the supported ways: `npm start`
// (scripts/start.mjs), the Docker image (its CMD), the single executable (its SEA config's
// execArgv, build-binary.mjs) and the benchmarks' servers (bench/support/processes.ts).
// test/cli/server-node-flags.test.ts holds them to this list.

/**
 * V8's young generation capped: left to itself, V8 grows it during a burst of concurrent runs (whose
 * requests, answers and events die young, in quantity) to many times this size and keeps it
 * committed until the server has been quiet for AGENTD_COMPACT_IDLE_S, so a busy server held most
 * of its memory in a young generation it no longer needed; the cap costs a little CPU per turn
 * (docs/operations.md, "Memory").
 */
export const SERVER_NODE_FLAGS = ['--max-semi-space-size=8'];
