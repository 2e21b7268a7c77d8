#!/usr/bin/env node
import { CLIENT_COMMANDS } from './cli/client-commands.js';
import { keepTickObjectShapes } from './perf/tick-shapes.js';

// The one binary: `agentd [serve] [options]` serves (the default); `agentd run|chat|conversations|events`
// are clients of a server (src/cli/program.ts). The built entry is dist/cli.js.

/** The server's modules load only when serving: the client commands start faster without them. */
async function serve(argv: readonly string[]): Promise<void> {
  // Before start-up's first full collection could free the shapes nextTick's entries are built with (tick-shapes.ts).
  keepTickObjectShapes();
  // Start-up (compiling modules, loading records) allocates a lot that is garbage at once or kept
  // for good: V8 grows the young generation on the way (fewer collections, each copying what it
  // finds alive), and the server gives it back once it listens and is quiet (serve.ts, compact-heap.ts).
  const { serve: start } = await import('./cli/serve.js');
  return start(argv);
}

/** And the client's (commander, the client SDK, the terminal renderer) only for a client command: the server starts without them. */
async function client(argv: readonly string[]): Promise<void> {
  const { runClient } = await import('./cli/client-main.js');
  const code = await runClient(argv);
  // Streams, timers and an embedded server are closed by now: exit with the command's code.
  process.exitCode = code;
  setTimeout(() => process.exit(code), 200).unref();
}

async function main(argv: readonly string[]): Promise<void> {
  const [first] = argv;
  if (first === 'serve') return serve(argv.slice(1));
  if (!(CLIENT_COMMANDS as readonly string[]).includes(first ?? '')) return serve(argv);
  return client(argv);
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`agentd: failed to start: ${message}\n`);
  process.exit(1);
});
