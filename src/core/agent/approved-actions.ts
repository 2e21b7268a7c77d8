import { FINISH_TOOL, finishLast, type RunContext, type RunOutcome } from './run-context.js';
import { runCall } from './run-call.js';
import { appendNote, FINISH_NOT_ALONE, recordNotRun } from './run-records.js';
import type { StuckDetector, StuckStep } from './stuck-detector.js';

/**
 * Actions the user approved before this run started (confirmation mode): each is checked by the
 * gate again, then run in order with `finish` last, before the run's first LLM turn. An outcome
 * when the run must end there.
 */
export async function runApproved(context: RunContext, stuck: StuckDetector): Promise<RunOutcome | null> {
  const approvedSteps: StuckStep[] = [];
  const approvedOthers = context.approved.filter((action) => action.tool_name !== FINISH_TOOL).length;
  for (const action of finishLast(context.approved, (a) => a.tool_name)) {
    if (context.signal.aborted) return { kind: 'aborted' };
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
      : await runCall(context, approvedSteps, { id: action.tool_call_id, name: action.tool_name, args: { ok: true, value: action.arguments } });
    if (outcome) return outcome;
  }
  if (approvedSteps.length > 0) {
    const verdict = stuck.observeTurn(approvedSteps);
    if (verdict.kind === 'stop') return { kind: 'stuck', reason: verdict.reason };
    if (verdict.kind === 'nudge') await appendNote(context, verdict.message);
  }
  return null;
}
