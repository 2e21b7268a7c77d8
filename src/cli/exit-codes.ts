import type { ConversationStatus } from '../client/index.js';

/** Exit codes of the client commands. */
export const EXIT = {
  ok: 0,
  /** The run ended in error or stuck, or the server could not be reached. */
  failed: 1,
  /** The command was called wrongly. */
  usage: 2,
  /** The run paused (max iterations) and could be continued. */
  paused: 3,
  /** Actions await approval that nobody gave, or a question awaits its answer. */
  needsApproval: 4,
  /** Ctrl-C. */
  interrupted: 130,
} as const;

export function exitCodeOf(status: ConversationStatus, interrupted: boolean): number {
  if (status === 'idle' || status === 'finished') return EXIT.ok;
  if (status === 'paused') return interrupted ? EXIT.interrupted : EXIT.paused;
  if (status === 'waiting_for_confirmation' || status === 'waiting_for_input') return EXIT.needsApproval;
  return EXIT.failed;
}
