import { z } from 'zod';
import { Timestamp } from '../schemas/common.js';
import { Usage } from '../schemas/conversation.js';

export const RunStatus = z.enum(['running', 'completed', 'paused', 'failed', 'canceled']).meta({ id: 'RunStatus' });
export type RunStatus = z.infer<typeof RunStatus>;

export const Run = z
  .object({
    id: z.uuid(),
    conversation_id: z.uuid(),
    status: RunStatus,
    started_at: Timestamp,
    ended_at: Timestamp.nullable(),
    iterations: z.int().min(0),
    usage: Usage,
    usage_by_agent: z
      .record(z.string(), Usage)
      .optional()
      .describe("The part of `usage` spent by subagents, by agent name (present once a subagent ran); the rest is the main agent's."),
    models_used: z.array(z.string()).optional().describe('The models that answered in this run, in the order they first did (a fallback appears here).'),
    /** Why the run ended (e.g. `finished`, `max_iterations`, `stuck`, `paused`, `waiting_for_confirmation`). */
    outcome: z.string().nullable(),
    error: z.object({ code: z.string(), message: z.string() }).nullable().optional(),
    files_changed: z.array(z.string()).optional().describe('Workdir paths the run changed (its start checkpoint against its end), once it has ended; absent without checkpoints.'),
    output: z.unknown().optional().describe('The final answer validated against the message\'s `output_schema` (absent when none was asked for).'),
  })
  .meta({ id: 'Run' });
export type Run = z.infer<typeof Run>;

/** Where run records persist: every change is saved; the newest saved state of a run wins. */
export interface RunStore {
  save(run: Run): void;
  /** All runs of a conversation, oldest first. */
  list(conversationId: string): Run[];
  drop(conversationId: string): void;
  /** Forget what is cached of the conversation's runs (an idle release); they are read again on next use. */
  release?(conversationId: string): void;
}
