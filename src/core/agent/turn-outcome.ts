import type { PendingAction } from '../schemas/conversation.js';
import type { LlmError, LlmToolCall } from './llm.js';
import type { RunOutcome } from './run-context.js';
import type { StuckDetector, StuckStep } from './stuck-detector.js';
import type { ParsedArguments } from './tool-executor.js';

/**
 * How one turn of the run loop ends: exactly one of these, each handled in one place (the
 * handlers in run-loop.ts), which starts the next turn or ends the run. The first eight are the
 * loop's named outcomes; the last three are cases the loop has always had that none of them fits.
 */
export type TurnOutcome =
  /** The reply's calls were run: the run ends if one of them ended it, waits if some need approval, else goes on. */
  | { kind: 'tool_calls'; ended: RunOutcome | null; pending: PendingAction[]; nudge: string | null }
  /** A text answer; `messageArrived`: a user message came while the model answered, and gets a turn of its own. */
  | { kind: 'answer'; text: string; messageArrived: boolean }
  /** The model declined (its `refusal`): recorded and checked as its answer. */
  | { kind: 'refused'; text: string; messageArrived: boolean }
  /** The reply was cut at the output token limit, with text (`cut_off`) or none (`cut_off_empty`). */
  | { kind: 'cut_off'; why: 'cut_off' | 'cut_off_empty' }
  | { kind: 'stuck'; reason: string }
  | { kind: 'budget_spent'; limit: number }
  | { kind: 'aborted' }
  /** An LlmError: the request failed, or the model's replies stayed unusable past their bound. */
  | { kind: 'failed'; error: LlmError }
  /** A reply with nothing in it, not cut off. */
  | { kind: 'empty' }
  /** A user message sent with the `interrupt` strategy stopped the LLM request or a call. */
  | { kind: 'interrupted'; stopped: 'llm' | 'tool' | 'none'; toolCallIds: string[]; unrun: PendingAction[] }
  /** A UserPromptSubmit hook blocked the user's message before the model was asked. */
  | { kind: 'prompt_blocked' };

/** A reply that asks for tool calls, their arguments parsed (or the reason they could not be). */
export interface CallsReply {
  kind: 'calls';
  calls: { call: LlmToolCall; args: ParsedArguments }[];
  responseId: string;
  thought: string | null;
  /** Cut at the output token limit: a call whose arguments were cut is not run. */
  cutOff: boolean;
}

/** What the model replied, as the loop tells replies apart: calls, or an outcome of its own. */
export type Reply = CallsReply | { kind: 'answer'; text: string } | { kind: 'refused'; text: string } | Extract<TurnOutcome, { kind: 'cut_off' | 'empty' }>;

/** What running one reply's calls came to (or the actions approved before the run). */
export interface CallsDone {
  /** A call ended the run: finish ran, a final_output was accepted, or the run was stopped. */
  ended: RunOutcome | null;
  /** Calls that wait for the user's approval. */
  pending: PendingAction[];
  /** The calls that ran, as the stuck detector compares them. */
  steps: StuckStep[];
  /** After an interrupt: the call it stopped while it ran, and the calls after it, recorded but not run. */
  stopped: string | null;
  skipped: string[];
}

/** The outcome of a turn whose reply asked for calls, once they ran. */
export function callsOutcome(done: CallsDone, options: { interrupted: boolean; stuck: StuckDetector }): TurnOutcome {
  if (done.ended?.kind === 'aborted') return { kind: 'aborted' };
  if (done.ended) return { kind: 'tool_calls', ended: done.ended, pending: [], nudge: null };
  if (options.interrupted) {
    return { kind: 'interrupted', stopped: done.stopped ? 'tool' : 'none', toolCallIds: [...(done.stopped ? [done.stopped] : []), ...done.skipped], unrun: done.pending };
  }
  if (done.pending.length > 0) return { kind: 'tool_calls', ended: null, pending: done.pending, nudge: null };
  // Loops are judged per reply: a batch of parallel calls failing alike is not a loop, the same reply again and again is.
  const verdict = options.stuck.observeTurn(done.steps);
  if (verdict.kind === 'stop') return { kind: 'stuck', reason: verdict.reason };
  return { kind: 'tool_calls', ended: null, pending: [], nudge: verdict.kind === 'nudge' ? verdict.message : null };
}
