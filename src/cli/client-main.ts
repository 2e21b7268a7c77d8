import { CommanderError } from 'commander';
import { AgentdConnectionError, AgentdError } from '../client/index.js';
import { UsageError } from './connection.js';
import { EXIT } from './exit-codes.js';
import { runClientCommand } from './program.js';

/** Runs a client command (`agentd run|chat|conversations|events`); resolves to its exit code, failures reported on stderr. */
export async function runClient(argv: readonly string[]): Promise<number> {
  try {
    return await runClientCommand(argv);
  } catch (error) {
    return reportFailure(error);
  }
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
