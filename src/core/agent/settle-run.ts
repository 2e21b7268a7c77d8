import { isoTimestamp, type Clock } from '../clock.js';
import type { ConversationRecord } from '../conversations/conversation-record.js';
import type { AgentEvent, ConversationStatus, NewEvent } from '../schemas/event.js';
import type { ActiveRun, AgentSession } from './agent-session.js';
import type { Run, RunStatus } from './run-record.js';
import type { RunOutcome } from './run-context.js';

const STOP_REASONS: Record<NonNullable<ActiveRun['stopAs']>, string> = {
  paused: 'Paused by the user.',
  canceled: 'The run was canceled.',
  deleted: 'The conversation was deleted.',
  shutdown: 'The server is shutting down.',
};

const DATABASE_UNAVAILABLE = 'The database was unreachable while the run was in progress; POST /run to continue.';

/**
 * The end of a run, as events and state: every tool call left open gets an observation (so the
 * history stays valid for the provider), the run record gets its status, the conversation its
 * status with a `state_update` saying why.
 */
export async function settleRun(options: {
  outcome: RunOutcome;
  active: ActiveRun;
  record: ConversationRecord;
  session: AgentSession;
  clock: Clock;
  append: (event: NewEvent) => Promise<{ event: AgentEvent }>;
  saveRun: (run: Run) => void;
  setStatus: (status: ConversationStatus, options: { runId: string; reason?: string }) => Promise<void>;
}): Promise<void> {
  const { outcome, active, record, session } = options;
  const run = active.run;
  const stopReason = outcome.kind === 'database_unavailable' ? DATABASE_UNAVAILABLE : STOP_REASONS[active.stopAs ?? 'paused'];

  if (outcome.kind !== 'waiting_for_confirmation') {
    // A subagent that did not wind down in time: its open calls are closed too, tagged as its own.
    for (const [parentCallId, child] of [...session.children].reverse()) {
      for (const callId of child.history.pendingCallIds) {
        await options.append({ kind: 'observation', source: 'environment', tool_call_id: callId, tool_name: child.history.toolNameOf(callId) ?? 'unknown', content: `Interrupted: ${stopReason} The tool call did not complete.`, is_error: true, data: { interrupted: true }, run_id: run.id, parent_tool_call_id: parentCallId, agent: child.agent ?? 'unknown' });
      }
    }
    for (const callId of session.history.pendingCallIds) {
      await options.append({
        kind: 'observation',
        source: 'environment',
        tool_call_id: callId,
        tool_name: session.history.toolNameOf(callId) ?? 'unknown',
        content: `Interrupted: ${stopReason} The tool call did not complete.`,
        is_error: true,
        data: { interrupted: true },
        run_id: run.id,
      } satisfies Extract<NewEvent, { kind: 'observation' }>);
    }
  }
  if (outcome.kind === 'error') {
    const { event } = await options.append({ kind: 'agent_error', source: 'system', error: outcome.code, message: outcome.message, ...(outcome.details && { details: outcome.details }), run_id: run.id });
    // The run record keeps the message as recorded: secret values (a provider may quote them) masked.
    run.error = { code: outcome.code, message: event.kind === 'agent_error' ? event.message : outcome.message };
  }

  const [runStatus, status, reason] = describe(outcome, active, stopReason, record);
  run.status = runStatus;
  run.ended_at = isoTimestamp(options.clock.now());
  run.outcome = outcome.kind === 'aborted' ? (active.stopAs ?? 'paused') : outcome.kind;
  options.saveRun(run);
  await options.setStatus(status, { runId: run.id, ...(reason ? { reason } : {}) });
}

function describe(outcome: RunOutcome, active: ActiveRun, stopReason: string, record: ConversationRecord): [RunStatus, ConversationStatus, string | undefined] {
  switch (outcome.kind) {
    case 'idle':
      return ['completed', 'idle', undefined];
    case 'finished':
      return ['completed', 'finished', 'The agent called finish.'];
    case 'max_iterations':
      return ['completed', 'paused', `Reached max_iterations_per_run (${outcome.limit}); POST /run to continue.`];
    case 'stuck':
      return ['completed', 'stuck', outcome.reason];
    case 'waiting_for_confirmation':
      return ['paused', 'waiting_for_confirmation', `${record.pending_actions.length} action(s) await approval.`];
    case 'database_unavailable':
      return ['paused', 'paused', DATABASE_UNAVAILABLE];
    case 'quota_exceeded':
      return ['paused', 'paused', outcome.message];
    case 'aborted':
      return [active.stopAs === 'canceled' ? 'canceled' : 'paused', 'paused', stopReason];
    case 'error':
      return ['failed', 'error', outcome.message];
    case 'budget_exceeded':
      return ['paused', 'paused', outcome.reason];
  }
}

