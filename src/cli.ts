#!/usr/bin/env node
import { CommanderError } from 'commander';
import { AgentdConnectionError, AgentdError } from './client/index.js';
import { UsageError } from './cli/connection.js';
import { EXIT } from './cli/exit-codes.js';
import { CLIENT_COMMANDS, runClientCommand } from './cli/program.js';

// The one binary: `agentd [serve] [options]` serves (the default); `agentd run|chat|conversations|events`
// are clients of a server (src/cli/program.ts). The built entry is dist/cli.js.

/** The server's modules load only when serving: the client commands start faster without them. */
async function serve(argv: readonly string[]): Promise<void> {
  const { serve: start } = await import('./cli/serve.js');
  return start(argv);
}

async function main(argv: readonly string[]): Promise<void> {
  const [first] = argv;
  if (first === 'serve') return serve(argv.slice(1));
  if (!(CLIENT_COMMANDS as readonly string[]).includes(first ?? '')) return serve(argv);
  let code: number;
  try {
    code = await runClientCommand(argv);
  } catch (error) {
    code = reportFailure(error);
  }
  // Streams, timers and an embedded server are closed by now: exit with the command's code.
  process.exitCode = code;
  setTimeout(() => process.exit(code), 200).unref();
}

function reportFailure(error: unknown): number {
  if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
  if (error instanceof UsageError) {
    process.stderr.write(`agentd: ${error.message}\n`);
    return EXIT.usage;
  }
  if (error instanceof AgentdError) {
    process.stderr.write(`agentd: ${error.code}: ${error.message}\n`);
    return EXIT.failed;
  }
  if (error instanceof AgentdConnectionError) {
    process.stderr.write(`agentd: ${error.message}\n`);
    return EXIT.failed;
  }
  process.stderr.write(`agentd: ${error instanceof Error ? error.message : String(error)}\n`);
  return EXIT.failed;
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  process.stderr.write(`agentd: failed to start: ${message}\n`);
  process.exit(1);
});
