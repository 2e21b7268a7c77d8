import type { ToolDefinition } from '../tools/tool.js';
import { FINISH_TOOL, finishLast, type RunContext, type RunOutcome } from './run-context.js';
import { finalOutputOutcome, runCall } from './run-call.js';
import { CUT_CALL_RESULT, FINISH_NOT_ALONE, INTERRUPTED_NOT_RUN, recordAction, recordNotRun } from './run-records.js';
import { FINAL_OUTPUT_TOOL, type OutputRequirement } from './structured-output.js';
import { canonicalToolName } from './tool-executor.js';
import type { CallsDone, CallsReply } from './turn-outcome.js';

/**
 * The `acting` state of a turn: the reply's calls in order, each recorded as an action before it
 * runs (or is refused), `finish` last. `signal`: the turn's, aborted when the run stops or an
 * interrupt comes.
 */
export async function runCalls(
  context: RunContext,
  reply: CallsReply,
  turn: { tools: ReadonlyMap<string, ToolDefinition>; output: OutputRequirement | null; signal: AbortSignal },
): Promise<CallsDone> {
  const { tools, output, signal } = turn;
  const { responseId, thought } = reply;
  // Named as the tools are before anything sees them: the action, the permission rules and hooks get the canonical name.
  const calls = reply.calls.map(({ call, args }) => ({ call: { ...call, name: canonicalToolName(tools, call.name) }, args }));
  // `finish` beside other calls runs after them and is refused: the model has not seen their results yet.
  const others = calls.filter(({ call }) => call.name !== FINISH_TOOL);
  const done: CallsDone = { ended: null, pending: [], steps: [], stopped: null, skipped: [] };
  // Calls of a concurrent tool (`task`) start and run side by side; any other call waits for them first.
  const running: Promise<RunOutcome | null>[] = [];
  const joined = async (): Promise<RunOutcome | null> => {
    const outcomes = await Promise.all(running.splice(0));
    return outcomes.find((outcome) => outcome !== null) ?? null;
  };
  for (const { call, args } of finishLast(calls, ({ call }) => call.name)) {
    if (context.signal.aborted) return { ...done, ended: (await joined()) ?? { kind: 'aborted' } };
    if (context.interrupts.pending !== null) {
      // The user interrupted: the calls left are recorded (the history stays valid), never run.
      await recordAction(context, { call, args, responseId, thought });
      await recordNotRun(context, call, INTERRUPTED_NOT_RUN, 'interrupted');
      done.skipped.push(call.id);
      continue;
    }
    let outcome: RunOutcome | null;
    if (call.name === FINISH_TOOL && output) {
      await recordAction(context, { call, args, responseId, thought });
      outcome = await recordNotRun(context, call, output.finishRefusal, 'output_required');
    } else if (!args.ok || (call.name === FINISH_TOOL && others.length > 0)) {
      await recordAction(context, { call, args, responseId, thought });
      // Arguments cut at the output limit are not run: the model hears why and writes them shorter.
      if (reply.cutOff && !args.ok) outcome = await recordNotRun(context, call, CUT_CALL_RESULT, 'output_truncated');
      else if (args.ok) outcome = await recordNotRun(context, call, FINISH_NOT_ALONE, 'finish_not_alone');
      else outcome = await runCall(context, done.steps, { id: call.id, name: call.name, args }, tools, signal);
    } else {
      const verdict = await context.gate.beforeTool({ id: call.id, name: call.name, args: args.value });
      // The checkpoint before a call that runs is taken before its action is recorded: the tool starts right after it.
      if (verdict.kind !== 'deny' && verdict.kind !== 'ask') await context.beforeTool?.({ name: call.name, args: verdict.args });
      const event = await recordAction(context, { call, args: { ok: true, value: verdict.args }, original: verdict.original, responseId, thought });
      if (verdict.kind === 'deny') {
        await context.append({ kind: 'rejection', source: 'system', tool_call_id: call.id, tool_name: call.name, reason: verdict.reason, run_id: context.run.id, ...(verdict.rule && { rule: verdict.rule }), ...(verdict.hookPoint && { hook_point: verdict.hookPoint }) });
        continue;
      }
      if (verdict.kind === 'ask') {
        // The arguments as recorded (secret values masked): what the user approves is what runs.
        done.pending.push({ tool_call_id: call.id, tool_name: call.name, arguments: event.kind === 'action' ? event.arguments : {}, event_id: event.id });
        continue;
      }
      const run = () => runCall(context, done.steps, { id: call.id, name: call.name, args: { ok: true, value: verdict.args } }, tools, signal);
      if (tools.get(call.name)?.concurrent) {
        running.push(run());
        continue;
      }
      outcome = (await joined()) ?? (await run());
      if (!outcome && call.name === FINAL_OUTPUT_TOOL && output) outcome = await finalOutputOutcome(context, output, verdict.args);
      if (context.interrupts.pending !== null && done.stopped === null) done.stopped = call.id;
    }
    if (outcome) return { ...done, ended: (await joined()) ?? outcome };
  }
  return { ...done, ended: await joined() };
}
