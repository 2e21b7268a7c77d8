import type { ToolDefinition } from '../tools/tool.js';
import { iterationBudgetNote } from './iteration-budget.js';
import { LlmError } from './llm.js';
import { llmTurn, NOTES, NoteBudget, summaryTurn, type NoteReason } from './llm-turn.js';
import { StoppedAfterSummary } from './llm-request.js';
import { FINISH_TOOL, type RunContext, type RunOutcome } from './run-context.js';
import { continuedByStopHook, promptBlocked } from './run-call.js';
import { runApproved } from './approved-actions.js';
import { appendNote, INTERRUPTED_NOT_RUN, recordInterrupt, recordNotRun } from './run-records.js';
import { StuckDetector } from './stuck-detector.js';
import { FINAL_OUTPUT_TOOL, OutputRequirement } from './structured-output.js';
import { runCalls } from './turn-calls.js';
import { callsOutcome, type CallsReply, type TurnOutcome } from './turn-outcome.js';

type TurnSettings = ReturnType<RunContext['settings']>;

/** What a turn works with once it asks the model: read when it starts (the config may change mid-run). */
interface Turn {
  settings: TurnSettings;
  /** What the final answer owes, when the last user message carried an `output_schema`. */
  output: OutputRequirement | null;
  tools: ReadonlyMap<string, ToolDefinition>;
  /** The seq of the last user message when the turn started: a later one arrived during the turn. */
  userSeqBefore: number;
  /** Aborted when the run stops or an interrupt comes: the LLM request and the calls it makes run under it. */
  signal: AbortSignal;
}

/**
 * Where a run is. It opens once (SessionStart hooks, the actions approved before it), then each
 * turn goes `before_turn` → `asking` → `acting` (the reply's calls), or `before_turn` →
 * `summing_up` on the last step, and reaches `turn_over` with exactly one outcome, whose handler
 * starts the next turn or ends the run.
 */
type RunState =
  | { name: 'opening' }
  | { name: 'before_turn' }
  | { name: 'asking'; turn: Turn }
  | { name: 'acting'; turn: Turn; reply: CallsReply }
  | { name: 'summing_up'; settings: TurnSettings }
  | { name: 'turn_over'; outcome: TurnOutcome }
  | { name: 'ended'; outcome: RunOutcome };

const NEXT_TURN: RunState = { name: 'before_turn' };
const over = (outcome: TurnOutcome): RunState => ({ name: 'turn_over', outcome });
const end = (outcome: RunOutcome): RunState => ({ name: 'ended', outcome });

/** One run of the agent: turns until one ends it. An LlmError ends it as `error`; anything else (a full disk) is thrown. */
export async function executeRun(context: RunContext): Promise<RunOutcome> {
  const loop = new RunLoop(context);
  let state: RunState = { name: 'opening' };
  try {
    while (state.name !== 'ended') state = await loop.step(state);
  } finally {
    loop.releaseMessages();
  }
  return state.outcome;
}

type Handlers = { [K in TurnOutcome['kind']]: (outcome: Extract<TurnOutcome, { kind: K }>) => Promise<RunState> | RunState };

class RunLoop {
  private readonly stuck = new StuckDetector(4);
  private readonly notes = new NoteBudget();
  /** Kept from turn to turn while the last user message's output_schema stays the same (it counts the invalid answers). */
  private output: OutputRequirement | null = null;
  /** Whether user messages that arrive now wait in the history until the turn is recorded. */
  private holding = false;

  constructor(private readonly context: RunContext) {}

  async step(state: Exclude<RunState, { name: 'ended' }>): Promise<RunState> {
    try {
      switch (state.name) {
        case 'opening':
          return await this.open();
        case 'before_turn':
          return await this.beforeTurn();
        case 'asking':
          return await this.ask(state.turn);
        case 'acting':
          return await this.act(state.turn, state.reply);
        case 'summing_up':
          return over(await summaryTurn(this.context, state.settings));
        case 'turn_over': {
          const next = await this.handle(state.outcome);
          this.releaseMessages();
          return next;
        }
      }
    } catch (error) {
      // The LLM request failed, or the model's replies stayed unusable past their bound (see NoteBudget, OutputRequirement).
      if (error instanceof LlmError) return over({ kind: 'failed', error });
      throw error;
    }
  }

  releaseMessages(): void {
    if (!this.holding) return;
    this.holding = false;
    this.context.history.release();
  }

  private holdMessages(): void {
    this.holding = true;
    this.context.history.hold();
  }

  private async open(): Promise<RunState> {
    const { context } = this;
    if (context.sessionStart) for (const note of await context.gate.onSessionStart()) await appendNote(context, note);
    if (context.approved.length === 0) return NEXT_TURN;
    // The actions approved before the run: their outcome is read as that of a turn's calls.
    return over(callsOutcome(await runApproved(context), { interrupted: false, stuck: this.stuck }));
  }

  /** Before the model is asked: a stop, a blocked prompt or the spent step budget ends the turn here. */
  private async beforeTurn(): Promise<RunState> {
    const { context } = this;
    if (context.signal.aborted) return over({ kind: 'aborted' });
    const overSpend = await context.spendCheck?.();
    if (overSpend) return end({ kind: 'quota_exceeded', message: overSpend.message });
    if (await promptBlocked(context)) return over({ kind: 'prompt_blocked' });
    const spent = await this.overBudget();
    if (spent) return end(spent);
    const settings = context.settings();
    if (context.run.iterations >= settings.maxIterations) return over({ kind: 'budget_spent', limit: settings.maxIterations });
    context.onIteration();
    const ending = context.history.outputSchema ? 'schema' : context.tools.has(FINISH_TOOL) ? 'finish' : 'answer';
    const budgetNote = iterationBudgetNote(context.run.iterations, settings.maxIterations, ending);
    if (budgetNote) await appendNote(context, budgetNote.text);
    if (budgetNote?.last) {
      this.holdMessages();
      return { name: 'summing_up', settings };
    }
    // The last user message's output_schema decides what the final answer owes (kept while it stays the same).
    const schema = context.history.outputSchema;
    if (this.output?.schema !== schema) this.output = schema ? new OutputRequirement(schema, { llm: context.llm, settings: settings.llm }) : null;
    const output = this.output;
    const tools = output?.tool ? new Map([...context.tools, [FINAL_OUTPUT_TOOL, output.tool]]) : context.tools;
    const userSeqBefore = context.history.lastUserSeq;
    // An interrupt that came between steps: the message is in the history this turn sends.
    await recordInterrupt(context, 'none', []);
    // Messages that arrive during the turn (its LLM request, its calls) follow its results.
    this.holdMessages();
    // One signal for the LLM turn and the calls it makes (an interrupt taken above made a fresh one).
    return { name: 'asking', turn: { settings, output, tools, userSeqBefore, signal: context.interrupts.signal(context.signal) } };
  }

  /** Before the next LLM request: a budget reached is recorded, and pauses or stops the run (notify: it goes on). */
  private async overBudget(): Promise<RunOutcome | null> {
    const verdict = this.context.checkBudget?.();
    if (!verdict) return null;
    const { breach } = verdict;
    // A subagent of this run reached it first: its event says so, and this agent ends the same way.
    if (!verdict.recorded) await this.context.append({ kind: 'budget_exceeded', source: 'system', ...breach, run_id: this.context.run.id });
    const what = breach.per === 'run' ? 'This run' : 'The conversation';
    const limit = [breach.limit.max_cost_usd !== undefined && `$${breach.limit.max_cost_usd}`, breach.limit.max_tokens !== undefined && `${breach.limit.max_tokens} tokens`].filter(Boolean).join(' / ');
    const reason = `${what} reached its budget (${limit}): used $${breach.used.cost_usd.toFixed(4)} and ${breach.used.tokens} tokens.`;
    if (breach.action === 'pause') return { kind: 'budget_exceeded', reason: `${reason} Raise the budget (PUT /config) and POST /run to continue.` };
    if (breach.action === 'stop') return { kind: 'error', code: 'budget_exceeded', message: reason };
    return null;
  }

  /** After the turn's condensation summary: a spending limit it reached is recorded, and ends the run (notify: it goes on). */
  private async spentBySummary(): Promise<RunOutcome | null> {
    const overSpend = await this.context.spendCheck?.();
    if (overSpend) return { kind: 'quota_exceeded', message: overSpend.message };
    return this.overBudget();
  }

  private async ask(turn: Turn): Promise<RunState> {
    const stop: { outcome: RunOutcome | null } = { outcome: null };
    let reply: Awaited<ReturnType<typeof llmTurn>>;
    try {
      reply = await llmTurn(this.context, { ...turn, afterSummary: async () => (stop.outcome = await this.spentBySummary()) !== null });
    } catch (error) {
      if (error instanceof StoppedAfterSummary && stop.outcome) return end(stop.outcome);
      throw error;
    }
    switch (reply.kind) {
      case 'calls':
        return { name: 'acting', turn, reply };
      case 'answer':
      case 'refused':
        // Read as the answer is recorded: a message that came while the model answered gets a turn of its own.
        return over({ ...reply, messageArrived: this.context.history.lastUserSeq > turn.userSeqBefore });
      default:
        return over(reply);
    }
  }

  private async act(turn: Turn, reply: CallsReply): Promise<RunState> {
    // Calls cut at the output limit still run (those whose arguments were cut are refused), and count as a cut-off reply.
    if (reply.cutOff) this.notes.spend('cut_off');
    else this.notes.reset();
    const done = await runCalls(this.context, reply, turn);
    return over(callsOutcome(done, { interrupted: this.context.interrupts.pending !== null, stuck: this.stuck }));
  }

  /** The one place each outcome is handled. */
  private handle(outcome: TurnOutcome): Promise<RunState> | RunState {
    return (this.handlers[outcome.kind] as (outcome: TurnOutcome) => Promise<RunState> | RunState)(outcome);
  }

  private readonly handlers: Handlers = {
    tool_calls: async ({ ended, pending, nudge }) => {
      if (ended) return end(ended);
      if (pending.length > 0) {
        this.context.setPendingActions(pending);
        return end({ kind: 'waiting_for_confirmation' });
      }
      if (nudge !== null) await appendNote(this.context, nudge);
      return NEXT_TURN;
    },
    answer: (outcome) => this.answered(outcome),
    // The model's refusal is its answer: recorded, and checked as one.
    refused: (outcome) => this.answered(outcome),
    cut_off: ({ why }) => this.askAgain(why),
    stuck: ({ reason }) => end({ kind: 'stuck', reason }),
    budget_spent: ({ limit }) => end({ kind: 'max_iterations', limit }),
    aborted: () => end({ kind: 'aborted' }),
    // A stop that came meanwhile wins: the run was paused or canceled, not failed.
    failed: ({ error }) => end(this.context.signal.aborted ? { kind: 'aborted' } : { kind: 'error', code: error.code, message: error.message, ...(error.more.details && { details: error.more.details }) }),
    empty: () => this.askAgain('empty'),
    interrupted: async ({ stopped, toolCallIds, unrun }) => {
      // Calls that waited for approval are answered too: the user's new message comes first.
      for (const action of unrun) await recordNotRun(this.context, { id: action.tool_call_id, name: action.tool_name, arguments: '' }, INTERRUPTED_NOT_RUN, 'interrupted');
      await recordInterrupt(this.context, stopped, [...toolCallIds, ...unrun.map((action) => action.tool_call_id)]);
      return NEXT_TURN;
    },
    prompt_blocked: () => end({ kind: 'idle' }),
  };

  private async answered({ text, messageArrived }: { text: string; messageArrived: boolean }): Promise<RunState> {
    const { context, output } = this;
    this.notes.reset();
    if (messageArrived) return NEXT_TURN;
    if (output) {
      const check = output.checkAnswer(text);
      if (!check.ok) {
        await appendNote(context, output.fail(check.errors));
        return NEXT_TURN;
      }
      context.run.output = check.value;
    }
    if (await continuedByStopHook(context, text)) return NEXT_TURN;
    return end({ kind: 'idle' });
  }

  /** The reply could not be used: the model is told and asked again, a bounded number of times. */
  private async askAgain(why: NoteReason): Promise<RunState> {
    this.notes.spend(why);
    await appendNote(this.context, NOTES[why]);
    return NEXT_TURN;
  }
}
