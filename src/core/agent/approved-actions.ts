import { FINISH_TOOL, finishLast, type RunContext } from './run-context.js';
import { runCall } from './run-call.js';
import { FINISH_NOT_ALONE, recordNotRun } from './run-records.js';
import type { StuckStep } from './stuck-detector.js';
import type { CallsDone } from './turn-outcome.js';

/**
 * Actions the user approved before this run started (confirmation mode): each is checked by the
 * gate again, then run in order with `finish` last, before the run's first LLM turn. What they
 * come to is read as the outcome of a turn's calls (see callsOutcome).
 */
export async function runApproved(context: RunContext): Promise<CallsDone> {
  const steps: StuckStep[] = [];
  const done = (ended: CallsDone['ended']): CallsDone => ({ ended, pending: [], steps, stopped: null, skipped: [] });
  const approvedOthers = context.approved.filter((action) => action.tool_name !== FINISH_TOOL).length;
  for (const action of finishLast(context.approved, (a) => a.tool_name)) {
    if (context.signal.aborted) return done({ kind: 'aborted' });
    const call = { id: action.tool_call_id, name: action.tool_name, arguments: '' };
    const recheck = await context.gate.beforeApproved({ name: action.tool_name, args: action.arguments });
    if (recheck.kind === 'deny') {
      await context.append({ kind: 'rejection', source: 'system', tool_call_id: action.tool_call_id, tool_name: action.tool_name, reason: recheck.reason, run_id: context.run.id, ...(recheck.rule && { rule: recheck.rule }) });
      continue;
    }
    const notAlone = action.tool_name === FINISH_TOOL && approvedOthers > 0;
    if (!notAlone) await context.beforeTool?.({ name: action.tool_name, args: action.arguments });
    const outcome = notAlone
      ? await recordNotRun(context, call, FINISH_NOT_ALONE, 'finish_not_alone')
      : await runCall(context, steps, { id: action.tool_call_id, name: action.tool_name, args: { ok: true, value: action.arguments } });
    if (outcome) return done(outcome);
  }
  return done(null);
}
