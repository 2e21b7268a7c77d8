import type { ToolDefinition } from '../tools/tool.js';
import { FINISH_TOOL, type RunContext, type RunOutcome } from './run-context.js';
import { appendNote } from './run-records.js';
import type { StuckStep } from './stuck-detector.js';
import type { OutputRequirement } from './structured-output.js';
import { executeTool, type ParsedArguments } from './tool-executor.js';

// One call that runs, and the points where hooks may change the run's course (UserPromptSubmit, Stop).

/**
 * Execute one recorded action and record its observation; an outcome when the run must end.
 * `signal`: the turn's (see llmTurn), else one of its own.
 */
export async function runCall(
  context: RunContext,
  steps: StuckStep[],
  call: { id: string; name: string; args: ParsedArguments },
  tools: ReadonlyMap<string, ToolDefinition> = context.tools,
  signal: AbortSignal = context.interrupts.signal(context.signal),
): Promise<RunOutcome | null> {
  const toolContext = { ...context.toolContext, signal, toolCallId: call.id };
  const result = await executeTool({ tools, name: call.name, args: call.args, context: toolContext });
  const note = call.args.ok && !context.signal.aborted ? await context.gate.afterTool({ id: call.id, name: call.name, args: call.args.value }, result) : null;
  await context.append({
    kind: 'observation',
    source: 'environment',
    tool_call_id: call.id,
    tool_name: call.name,
    content: note === null ? result.content : `${result.content}\n\n${note}`,
    is_error: result.isError,
    data: result.data ?? {},
    run_id: context.run.id,
  });
  if (call.name === FINISH_TOOL && !result.isError) {
    if (!context.signal.aborted && (await continuedByStopHook(context, result.content))) return null;
    return { kind: 'finished', message: result.content };
  }
  if (context.signal.aborted) return { kind: 'aborted' };
  steps.push({
    action: JSON.stringify([call.name, call.args.ok ? call.args.value : null]),
    observation: result.content,
    // A command that exits non-zero failed too, though its observation is not an error.
    isError: result.isError || (typeof result.data?.exit_code === 'number' && result.data.exit_code !== 0),
    livePoll: call.args.ok && call.args.value.is_input === true && result.data?.still_running === true,
  });
  return null;
}

/** After a final_output call ran: accepted ends the run with its value; rejected counts against the bound. */
export async function finalOutputOutcome(context: RunContext, output: OutputRequirement, args: Record<string, unknown>): Promise<RunOutcome | null> {
  const check = output.checkCall(args);
  if (check.ok) {
    context.run.output = check.value;
    return { kind: 'idle' };
  }
  // The observation already told the model what was wrong; past the bound the run fails.
  output.fail(check.errors);
  return null;
}

/** UserPromptSubmit on the messages the model has not seen: context is added; a block (the model told so) ends the run. */
export async function promptBlocked(context: RunContext): Promise<boolean> {
  for (const prompt of context.history.takePrompts()) {
    const checked = await context.gate.onPrompt(prompt);
    if (checked.blocked !== null) {
      await appendNote(context, `The user's last message was blocked by a UserPromptSubmit hook and must not be acted on: ${checked.blocked}`);
      return true;
    }
    for (const note of checked.context) await appendNote(context, note);
  }
  return false;
}

/** Stop hooks may keep the run going (a bounded number of times): the model hears why. */
export async function continuedByStopHook(context: RunContext, lastMessage: string | null): Promise<boolean> {
  const reason = await context.gate.onStop(lastMessage);
  if (reason === null) return false;
  await appendNote(context, `A Stop hook asks you to continue: ${reason}`);
  return true;
}
