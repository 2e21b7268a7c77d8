import { randomUUID } from 'node:crypto';
import type { PendingAction } from '../schemas/conversation.js';
import type { AgentEvent, NewEvent } from '../schemas/event.js';
import type { ToolContext, ToolDefinition } from '../tools/tool.js';
import type { ConversationHistory } from './conversation-history.js';
import { LlmError, type LlmSettings, type LlmToolCall } from './llm.js';
import { askLlm, type LlmRequestContext } from './llm-request.js';
import { TurnInterrupts } from './turn-interrupts.js';
import type { Run } from './run-record.js';
import { iterationBudgetNote } from './iteration-budget.js';
import { StuckDetector, type StuckStep } from './stuck-detector.js';
import { executeTool, parseArguments, type ParsedArguments } from './tool-executor.js';
import { FINAL_OUTPUT_TOOL, OutputRequirement } from './structured-output.js';
import type { ToolGate } from './tool-gate.js';

export const FINISH_TOOL = 'finish';

/** How a run ends: each turn of the loop ends in exactly one of these, or goes round again. */
export type RunOutcome =
  | { kind: 'idle' }
  | { kind: 'finished'; message: string }
  | { kind: 'max_iterations'; limit: number }
  | { kind: 'stuck'; reason: string }
  | { kind: 'waiting_for_confirmation' }
  | { kind: 'aborted' };

export interface RunContext extends LlmRequestContext {
  conversationId: string;
  run: Run;
  signal: AbortSignal;
  history: ConversationHistory;
  /** Read each turn: the config may change mid-conversation. */
  settings: () => { llm: LlmSettings; maxIterations: number; confirmationMode: boolean };
  tools: ReadonlyMap<string, ToolDefinition>;
  toolContext: ToolContext;
  append(event: NewEvent): Promise<AgentEvent>;
  /** Messages sent with multitask_strategy `interrupt` stop the step in progress. */
  interrupts: TurnInterrupts;
  onIteration(): void;
  setPendingActions(actions: PendingAction[]): void;
  /** Actions approved before this run started: executed first. */
  approved: PendingAction[];
  /** Permission rules and hooks: every tool call passes it before it runs. */
  gate: ToolGate;
  /** The conversation's first run: SessionStart hooks run before it. */
  sessionStart: boolean;
  /** Before a tool call runs (a workdir checkpoint), just before its action is recorded. */
  beforeTool?: (call: { name: string; args: Record<string, unknown> }) => Promise<void>;
}

/** One run of the agent: LLM turn, tool calls in order, repeat, until an outcome. Throws LlmError / abort. */
export async function executeRun(context: RunContext): Promise<RunOutcome> {
  const stuck = new StuckDetector(4);
  if (context.sessionStart) for (const note of await context.gate.onSessionStart()) await appendNote(context, note);
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
      const turn = await llmTurn(context, settings, output);
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
          else outcome = await runCall(context, steps, { id: call.id, name: call.name, args }, tools);
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
          const run = () => runCall(context, steps, { id: call.id, name: call.name, args: { ok: true, value: verdict.args } }, tools);
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

/** UserPromptSubmit on the messages the model has not seen: context is added; a block ends the run. */
async function checkPrompts(context: RunContext): Promise<RunOutcome | null> {
  for (const prompt of context.history.takePrompts()) {
    const checked = await context.gate.onPrompt(prompt);
    if (checked.blocked !== null) {
      await appendNote(context, `The user's last message was blocked by a UserPromptSubmit hook and must not be acted on: ${checked.blocked}`);
      return { kind: 'idle' };
    }
    for (const note of checked.context) await appendNote(context, note);
  }
  return null;
}

/** Stop hooks may keep the run going (a bounded number of times): the model hears why. */
async function continuedByStopHook(context: RunContext, lastMessage: string | null): Promise<boolean> {
  const reason = await context.gate.onStop(lastMessage);
  if (reason === null) return false;
  await appendNote(context, `A Stop hook asks you to continue: ${reason}`);
  return true;
}

/** The calls in order, with `finish` moved after the others. */
function finishLast<T>(calls: readonly T[], nameOf: (call: T) => string): T[] {
  return [...calls.filter((call) => nameOf(call) !== FINISH_TOOL), ...calls.filter((call) => nameOf(call) === FINISH_TOOL)];
}

const FINISH_NOT_ALONE =
  'Not run: `finish` was called in the same reply as other tool calls, so you had not seen their results. Their results are above: check them, and call `finish` alone in a reply of its own if the task is done.';

const INTERRUPTED_NOT_RUN = 'Not run: the user interrupted this turn with a new message (below). Read it before doing anything else.';

/** Takes a pending interrupt and records what it stopped; nothing when none is pending. */
async function recordInterrupt(context: RunContext, stopped: 'tool' | 'llm' | 'none', toolCallIds: string[]): Promise<void> {
  const messageSeq = context.interrupts.take();
  if (messageSeq === null) return;
  await context.append({ kind: 'interrupt', source: 'user', run_id: context.run.id, message_seq: messageSeq, stopped, tool_call_ids: toolCallIds });
}

const BUDGET_SPENT_RESULT = 'Not run: this run has used all its steps (max_iterations_per_run). Only a text summary was asked for.';

/** The last step: the model is asked for a summary, with tools offered but not allowed; the run then pauses. */
async function summaryTurn(context: RunContext, settings: ReturnType<RunContext['settings']>, note: string): Promise<RunOutcome> {
  await appendNote(context, note);
  const limit: RunOutcome = { kind: 'max_iterations', limit: settings.maxIterations };
  context.history.hold();
  try {
    const response = await askLlm(context, { settings: settings.llm, signal: context.signal, noTools: context.toolSchemas.length > 0 });
    if (context.signal.aborted) return { kind: 'aborted' };
    const text = response.content?.trim() ? response.content : null;
    if (response.toolCalls.length === 0) {
      if (text) await context.append({ kind: 'message', source: 'agent', role: 'assistant', content: text, run_id: context.run.id });
      return limit;
    }
    // Calls made anyway are recorded and answered (the history stays valid), never run.
    const responseId = randomUUID();
    for (const call of response.toolCalls) {
      await recordAction(context, { call, args: parseArguments(call.arguments), responseId, thought: text });
      await recordNotRun(context, call, BUDGET_SPENT_RESULT, 'budget_spent');
    }
    return limit;
  } finally {
    context.history.release();
  }
}

type NoteReason = 'cut_off' | 'cut_off_empty' | 'empty';

/** What the model is told, as a `message` from `system`, when its answer could not be used. */
const NOTES: Record<NoteReason, string> = {
  cut_off: 'Your last response was cut off at the output token limit. Continue from where it stopped; keep each response and tool call shorter (write a large file in several parts).',
  cut_off_empty: 'Your last response reached the output token limit before it contained any text or tool call (the reasoning may have used the whole budget). Continue the task with a shorter response.',
  empty: 'Your last response was empty. Continue the task: call a tool, or answer the user.',
};

const CUT_CALL_RESULT =
  'Not run: your response was cut off at the output token limit before the arguments of this call were complete. Make the call again with shorter arguments (write a large file in several parts).';

/** How many unusable answers in a row a run tolerates before it ends in an agent error. */
class NoteBudget {
  static readonly LIMIT = { cut_off: 3, empty: 2 } as const;
  private cutOffs = 0;
  private empties = 0;

  spend(why: NoteReason): void {
    if (why === 'empty') {
      if (++this.empties > NoteBudget.LIMIT.empty) {
        throw new LlmError('llm_empty_response', `The model answered with nothing ${this.empties} times in a row.`);
      }
    } else if (++this.cutOffs > NoteBudget.LIMIT.cut_off) {
      throw new LlmError('llm_output_truncated', `The model's answer was cut off at the output token limit ${this.cutOffs} times in a row: raise max_output_tokens.`);
    }
  }

  reset(): void {
    this.cutOffs = 0;
    this.empties = 0;
  }
}

type TurnResult =
  | { kind: 'aborted' }
  | { kind: 'interrupted' }
  | { kind: 'answered'; text: string }
  | { kind: 'note'; why: NoteReason }
  | { kind: 'calls'; calls: { call: LlmToolCall; args: ParsedArguments }[]; responseId: string; thought: string | null; cutOff: boolean };

/** Ask the LLM once and record its answer (text, or actions awaiting confirmation). */
async function llmTurn(context: RunContext, settings: ReturnType<RunContext['settings']>, output: OutputRequirement | null): Promise<TurnResult> {
  let response;
  try {
    response = await askLlm(context, { settings: settings.llm, signal: context.interrupts.signal(context.signal), output });
  } catch (error) {
    if (context.signal.aborted) return { kind: 'aborted' };
    // The answer being streamed is dropped: the model answers again, the new message in view.
    if (context.interrupts.pending !== null) return { kind: 'interrupted' };
    throw error;
  }
  if (context.signal.aborted) return { kind: 'aborted' };
  const cutOff = response.finishReason === 'length';
  if (response.toolCalls.length === 0) {
    const text = response.content?.trim() ? response.content : response.refusal?.trim() ? response.refusal : null;
    if (text === null) return { kind: 'note', why: cutOff ? 'cut_off_empty' : 'empty' };
    await context.append({ kind: 'message', source: 'agent', role: 'assistant', content: text, run_id: context.run.id });
    return cutOff ? { kind: 'note', why: 'cut_off' } : { kind: 'answered', text };
  }
  const responseId = randomUUID();
  const calls = response.toolCalls.map((call) => ({ call, args: parseArguments(call.arguments) }));
  return { kind: 'calls', calls, responseId, thought: response.content, cutOff };
}

function recordAction(context: RunContext, options: { call: LlmToolCall; args: ParsedArguments; original?: Record<string, unknown> | null; responseId: string; thought: string | null }): Promise<AgentEvent> {
  return context.append({
    kind: 'action',
    source: 'agent',
    tool_call_id: options.call.id,
    tool_name: options.call.name,
    arguments: options.args.ok ? options.args.value : {},
    thought: options.thought,
    run_id: context.run.id,
    llm_response_id: options.responseId,
    ...(options.call.extra ? { provider_fields: options.call.extra } : {}),
    ...(options.original ? { original_arguments: options.original } : {}),
  });
}

async function appendNote(context: RunContext, content: string): Promise<void> {
  await context.append({ kind: 'message', source: 'system', role: 'user', content, run_id: context.run.id });
}

/** A recorded call answered without running it: the model reads why. */
async function recordNotRun(context: RunContext, call: LlmToolCall, content: string, error: string): Promise<null> {
  await context.append({
    kind: 'observation',
    source: 'environment',
    tool_call_id: call.id,
    tool_name: call.name,
    content,
    is_error: true,
    data: { error },
    run_id: context.run.id,
  });
  return null;
}

/** Execute one recorded action and record its observation; an outcome when the run must end. */
async function runCall(context: RunContext, steps: StuckStep[], call: { id: string; name: string; args: ParsedArguments }, tools: ReadonlyMap<string, ToolDefinition> = context.tools): Promise<RunOutcome | null> {
  const toolContext = { ...context.toolContext, signal: context.interrupts.signal(context.signal), toolCallId: call.id };
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
async function finalOutputOutcome(context: RunContext, output: OutputRequirement, args: Record<string, unknown>): Promise<RunOutcome | null> {
  const check = output.checkCall(args);
  if (check.ok) {
    context.run.output = check.value;
    return { kind: 'idle' };
  }
  // The observation already told the model what was wrong; past the bound the run fails.
  output.fail(check.errors);
  return null;
}
