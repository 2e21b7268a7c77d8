import { isoTimestamp, type Clock } from '../clock.js';
import type { ConversationStore } from '../conversations/conversation-store.js';
import type { ConversationStatus } from '../schemas/event.js';
import type { AgentSession } from './agent-session.js';
import type { RunJournal } from './run-journal.js';
import type { RunStore } from './run-record.js';

export interface RunRecoveryDeps {
  conversations: ConversationStore;
  runs: RunStore;
  journal: RunJournal;
  /** The conversation's session, its history folded from the log. */
  session: (conversationId: string) => Promise<AgentSession>;
  clock: Clock;
}

/**
 * Runs cut off without settling (this server restarted, or the instance running them died): their
 * open tool calls get an observation and they end paused, so the history stays valid.
 */
export class RunRecovery {
  constructor(private readonly deps: RunRecoveryDeps) {}

  /**
   * After a restart: a conversation that was running comes back paused, its open tool calls
   * closed. The others' runs, read at start-up (the store checks each conversation's), are not
   * held on: read again when next used, as after an idle release. Right after a clean stop, which
   * ended and recorded every run, only a record still saying it runs is looked at (a run's end
   * that could not be saved): the runs of the others were not read and are not.
   */
  async recoverAfterRestart(): Promise<void> {
    const { conversations, runs } = this.deps;
    // Right after a clean stop, counted first: when no record says it runs (nearly always), none is
    // looked at (a walk of the records through the store is felt with many conversations).
    if (conversations.loadedAfterCleanStop) {
      const counts = conversations.countsByStatus();
      if (LIVE_STATUSES.every((status) => counts[status] === 0)) return;
    }
    for (const record of [...conversations.all()]) {
      if (conversations.loadedAfterCleanStop && !isLive(record.status)) continue;
      if (!(await this.recover(record.id, 'server_restart'))) runs.release?.(record.id);
    }
  }

  /** Recovers the conversation's cut-off run; whether there was one. */
  async recover(conversationId: string, outcome: 'server_restart' | 'failover'): Promise<boolean> {
    const { conversations, runs, journal } = this.deps;
    const record = conversations.record(conversationId);
    const live = isLive(record.status);
    // The run records say which runs never ended, also when the record on disk kept the status from before the run (ConversationStore.startRunning).
    const cutOff = runs.list(record.id).filter((run) => run.status === 'running');
    if (!live && cutOff.length === 0) return false;
    const runId = record.current_run_id ?? cutOff.at(-1)?.id ?? null;
    const session = await this.deps.session(record.id);
    const what = outcome === 'failover' ? 'the instance running it stopped' : 'the server restarted';
    // Subagents first (the latest started first: a nested one before the one that started it), then the main agent's calls.
    for (const [parentCallId, child] of [...session.children].reverse()) {
      for (const callId of child.history.pendingCallIds) {
        await journal.append(record.id, { kind: 'observation', source: 'environment', tool_call_id: callId, tool_name: child.history.toolNameOf(callId) ?? 'unknown', content: `Interrupted: ${what} while this tool was running.`, is_error: true, data: { interrupted: true }, run_id: runId, parent_tool_call_id: parentCallId, agent: child.agent ?? 'unknown' });
      }
    }
    for (const callId of session.history.pendingCallIds) {
      if (record.pending_actions.some((action) => action.tool_call_id === callId)) continue;
      await journal.append(record.id, { kind: 'observation', source: 'environment', tool_call_id: callId, tool_name: session.history.toolNameOf(callId) ?? 'unknown', content: `Interrupted: ${what} while this tool was running.`, is_error: true, data: { interrupted: true }, run_id: runId });
    }
    const now = isoTimestamp(this.deps.clock.now());
    for (const run of cutOff) runs.save({ ...run, status: 'paused', ended_at: now, outcome });
    await journal.setStatus(record, 'paused', { runId, reason: outcome === 'failover' ? 'The instance running this conversation stopped while the run was in progress.' : 'The server restarted while the run was in progress.' });
    return true;
  }
}

/** The statuses of a conversation whose run was cut off; a run waiting for an answer (ask_user) counts: it was cut off too. */
const LIVE_STATUSES = ['running', 'waiting_for_input'] as const satisfies readonly ConversationStatus[];

function isLive(status: string): boolean {
  return (LIVE_STATUSES as readonly string[]).includes(status);
}
