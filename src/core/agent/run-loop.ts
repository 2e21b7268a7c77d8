import type { PendingAction } from '../schemas/conversation.js';
import { FINISH_TOOL, finishLast, type RunContext, type RunOutcome } from './run-context.js';
import { iterationBudgetNote } from './iteration-budget.js';
import { llmTurn, NOTES, NoteBudget, summaryTurn } from './llm-turn.js';
import { checkPrompts, continuedByStopHook, finalOutputOutcome, runCall } from './run-call.js';
import { runApproved } from './approved-actions.js';
import { appendNote, CUT_CALL_RESULT, FINISH_NOT_ALONE, INTERRUPTED_NOT_RUN, recordAction, recordInterrupt, recordNotRun } from './run-records.js';
import { StuckDetector, type StuckStep } from './stuck-detector.js';
import { FINAL_OUTPUT_TOOL, OutputRequirement } from './structured-output.js';

/** One run of the agent: LLM turn, tool calls in order, repeat, until an outcome. Throws LlmError / abort. */
export async function executeRun(context: RunContext): Promise<RunOutcome> {
  const stuck = new StuckDetector(4);
  if (context.sessionStart) for (const note of await context.gate.onSessionStart()) await appendNote(context, note);
  const approvedOutcome = await runApproved(context, stuck);
  if (approvedOutcome) return approvedOutcome;

  const notes = new NoteBudget();
  let output = null as OutputRequirement | null;
  for (;;) {
    if (context.signal.aborted) return { kind: 'aborted' };
    const prompts = await checkPrompts(context);
    if (prompts) return prompts;
    const settings = context.settings();
    if (context.run.iterations >= settings.maxIterations) return { kind: 'max_iterations', limit: settings.maxIterations };
    context.onIteration();
    const budgetNote = iterationBudgetNote(context.run.iterations, settings.maxIterations);
    if (budgetNote?.last) return summaryTurn(context, settings, budgetNote.text);
    if (budgetNote) await appendNote(context, budgetNote.text);

    // The last user message's output_schema decides what the final answer owes (kept while it stays the same).
    const schema = context.history.outputSchema;
    if (output?.schema !== schema) output = schema ? new OutputRequirement(schema, { llm: context.llm, settings: settings.llm }) : null;
    const tools = output?.tool ? new Map([...context.tools, [FINAL_OUTPUT_TOOL, output.tool]]) : context.tools;
    const userSeqBefore = context.history.lastUserSeq;
    // An interrupt that came between steps: the message is in the history this turn sends.
    await recordInterrupt(context, 'none', []);
    // Messages that arrive during the turn (its LLM request, its calls) follow its results.
    context.history.hold();
    try {
      // One signal for the LLM turn and the calls it makes (an interrupt taken above made a fresh one).
      const signal = context.interrupts.signal(context.signal);
      const turn = await llmTurn(context, settings, output, signal);
      if (turn.kind === 'aborted') return turn;
      if (turn.kind === 'interrupted') {
        await recordInterrupt(context, 'llm', []);
        continue;
      }
      if (turn.kind === 'note') {
        // The answer was cut off or empty: tell the model and ask again, a bounded number of times.
        notes.spend(turn.why);
        await appendNote(context, NOTES[turn.why]);
        continue;
      }
      if (turn.kind === 'answered') {
        notes.reset();
        // A message that arrived while the LLM was answering gets its turn.
        if (context.history.lastUserSeq > userSeqBefore) continue;
        if (output) {
          const check = output.checkAnswer(turn.text);
          if (!check.ok) {
            await appendNote(context, output.fail(check.errors));
            continue;
          }
          context.run.output = check.value;
        }
        if (await continuedByStopHook(context, turn.text)) continue;
        return { kind: 'idle' };
      }
      if (turn.cutOff) notes.spend('cut_off');
      else notes.reset();
      // `finish` beside other calls runs after them and is refused: the model has not seen their results yet.
      const others = turn.calls.filter(({ call }) => call.name !== FINISH_TOOL);
      const ordered = finishLast(turn.calls, ({ call }) => call.name);
      const steps: StuckStep[] = [];
      const pending: PendingAction[] = [];
      const interrupted = { stopped: null as string | null, skipped: [] as string[] };
      // Calls of a concurrent tool (`task`) start and run side by side; any other call waits for them first.
      const running: Promise<RunOutcome | null>[] = [];
      const joined = async (): Promise<RunOutcome | null> => {
        const outcomes = await Promise.all(running.splice(0));
        return outcomes.find((outcome) => outcome !== null) ?? null;
      };
      for (const { call, args } of ordered) {
        if (context.signal.aborted) return (await joined()) ?? { kind: 'aborted' };
        if (context.interrupts.pending !== null) {
          // The user interrupted: the calls left are recorded (the history stays valid), never run.
          await recordAction(context, { call, args, responseId: turn.responseId, thought: turn.thought });
          await recordNotRun(context, call, INTERRUPTED_NOT_RUN, 'interrupted');
          interrupted.skipped.push(call.id);
          continue;
        }
        let outcome: RunOutcome | null;
        if (call.name === FINISH_TOOL && output) {
          await recordAction(context, { call, args, responseId: turn.responseId, thought: turn.thought });
          outcome = await recordNotRun(context, call, output.finishRefusal, 'output_required');
        } else if (!args.ok || (call.name === FINISH_TOOL && others.length > 0)) {
          await recordAction(context, { call, args, responseId: turn.responseId, thought: turn.thought });
          // Arguments cut at the output limit are not run: the model hears why and writes them shorter.
          if (turn.cutOff && !args.ok) outcome = await recordNotRun(context, call, CUT_CALL_RESULT, 'output_truncated');
          else if (args.ok) outcome = await recordNotRun(context, call, FINISH_NOT_ALONE, 'finish_not_alone');
          else outcome = await runCall(context, steps, { id: call.id, name: call.name, args }, tools, signal);
        } else {
          const verdict = await context.gate.beforeTool({ id: call.id, name: call.name, args: args.value });
          // The checkpoint before a call that runs is taken before its action is recorded: the tool starts right after it.
          if (verdict.kind !== 'deny' && verdict.kind !== 'ask') await context.beforeTool?.({ name: call.name, args: verdict.args });
          const event = await recordAction(context, { call, args: { ok: true, value: verdict.args }, original: verdict.original, responseId: turn.responseId, thought: turn.thought });
          if (verdict.kind === 'deny') {
            await context.append({ kind: 'rejection', source: 'system', tool_call_id: call.id, tool_name: call.name, reason: verdict.reason, run_id: context.run.id, ...(verdict.rule && { rule: verdict.rule }), ...(verdict.hookPoint && { hook_point: verdict.hookPoint }) });
            continue;
          }
          if (verdict.kind === 'ask') {
            // The arguments as recorded (secret values masked): what the user approves is what runs.
            pending.push({ tool_call_id: call.id, tool_name: call.name, arguments: event.kind === 'action' ? event.arguments : {}, event_id: event.id });
            continue;
          }
          const run = () => runCall(context, steps, { id: call.id, name: call.name, args: { ok: true, value: verdict.args } }, tools, signal);
          if (tools.get(call.name)?.concurrent) {
            running.push(run());
            continue;
          }
          outcome = (await joined()) ?? (await run());
          if (!outcome && call.name === FINAL_OUTPUT_TOOL && output) outcome = await finalOutputOutcome(context, output, verdict.args);
          if (context.interrupts.pending !== null && interrupted.stopped === null) interrupted.stopped = call.id;
        }
        if (outcome) return (await joined()) ?? outcome;
      }
      const joinedOutcome = await joined();
      if (joinedOutcome) return joinedOutcome;
      if (context.interrupts.pending !== null) {
        for (const action of pending) await recordNotRun(context, { id: action.tool_call_id, name: action.tool_name, arguments: '' }, INTERRUPTED_NOT_RUN, 'interrupted');
        const ids = [...(interrupted.stopped ? [interrupted.stopped] : []), ...interrupted.skipped, ...pending.map((action) => action.tool_call_id)];
        await recordInterrupt(context, interrupted.stopped ? 'tool' : 'none', ids);
        continue;
      }
      if (pending.length > 0) {
        context.setPendingActions(pending);
        return { kind: 'waiting_for_confirmation' };
      }
      // Loops are judged per reply: a batch of parallel calls failing alike is not a loop, the same reply again and again is.
      const verdict = stuck.observeTurn(steps);
      if (verdict.kind === 'stop') return { kind: 'stuck', reason: verdict.reason };
      if (verdict.kind === 'nudge') await appendNote(context, verdict.message);
    } finally {
      context.history.release();
    }
  }
}
