import { randomUUID } from 'node:crypto';
import { LlmError, type LlmResponse, type LlmSettings } from './llm.js';
import { askLlm } from './llm-request.js';
import type { RunContext } from './run-context.js';
import { recordAction, recordNotRun } from './run-records.js';
import type { OutputRequirement } from './structured-output.js';
import { canonicalToolName, parseArguments } from './tool-executor.js';
import type { Reply, TurnOutcome } from './turn-outcome.js';

// One request to the LLM inside a run, and what its answer becomes: text, calls to run, or a note asking again.

const BUDGET_SPENT_RESULT = 'Not run: this run has used all its steps (max_iterations_per_run). Only a text summary was asked for.';

/**
 * The `summing_up` state, the run's last step: the model is asked for a summary, with tools
 * offered but not allowed; the run then pauses.
 */
export async function summaryTurn(context: RunContext, settings: ReturnType<RunContext['settings']>): Promise<Extract<TurnOutcome, { kind: 'budget_spent' | 'aborted' }>> {
  const spent = { kind: 'budget_spent', limit: settings.maxIterations } as const;
  const response = await askLlm(context, { settings: settings.llm, signal: context.signal, noTools: context.toolSchemas.length > 0 });
  if (context.signal.aborted) return { kind: 'aborted' };
  const text = response.content?.trim() ? response.content : null;
  const responseId = randomUUID();
  await recordReasoning(context, response, { settings: settings.llm, responseId });
  if (response.toolCalls.length === 0) {
    if (text) await context.append({ kind: 'message', source: 'agent', role: 'assistant', content: text, run_id: context.run.id });
    return spent;
  }
  // Calls made anyway are recorded and answered (the history stays valid), never run.
  for (const sent of response.toolCalls) {
    const call = { ...sent, name: canonicalToolName(context.tools, sent.name) };
    await recordAction(context, { call, args: parseArguments(call.arguments), responseId, thought: text });
    await recordNotRun(context, call, BUDGET_SPENT_RESULT, 'budget_spent');
  }
  return spent;
}

export type NoteReason = 'cut_off' | 'cut_off_empty' | 'empty';

/** What the model is told, as a `message` from `system`, when its answer could not be used. */
export const NOTES: Record<NoteReason, string> = {
  cut_off: 'Your last response was cut off at the output token limit. Continue from where it stopped; keep each response and tool call shorter (write a large file in several parts).',
  cut_off_empty: 'Your last response reached the output token limit before it contained any text or tool call (the reasoning may have used the whole budget). Continue the task with a shorter response.',
  empty: 'Your last response was empty. Continue the task: call a tool, or answer the user.',
};

/** How many unusable answers in a row a run tolerates before it ends in an agent error. */
export class NoteBudget {
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

/**
 * The answer's reasoning as a `reasoning` event, before its message or its actions (the history
 * folds it into the assistant message that follows, to send it back). `show: false` records no
 * text; the opaque part, when there is one, is still kept to be sent back.
 */
async function recordReasoning(context: RunContext, response: LlmResponse, options: { settings: LlmSettings; responseId: string | null }): Promise<void> {
  const reasoning = response.reasoning;
  if (!reasoning) return;
  const content = options.settings.reasoning?.show === false ? '' : reasoning.text;
  if (content === '' && reasoning.providerData === undefined) return;
  const origin = reasoning.origin;
  await context.append({
    kind: 'reasoning',
    source: 'agent',
    content,
    ...(reasoning.providerData !== undefined ? { provider_data: reasoning.providerData } : {}),
    ...(origin ? { origin: { api: origin.api, model: origin.model, ...(origin.baseUrl ? { base_url: origin.baseUrl } : {}) } } : {}),
    llm_response_id: options.responseId,
    run_id: context.run.id,
  });
}

/** The text a reply without calls is recorded with: its content, else the model's refusal; null when both are blank. */
function textOf(response: LlmResponse): string | null {
  return response.content?.trim() ? response.content : response.refusal?.trim() ? response.refusal : null;
}

/** A reply by what it holds: calls; else its text, cut at the output limit or not, an answer or a refusal; else nothing. */
export function replyOf(response: LlmResponse): Reply {
  const cutOff = response.finishReason === 'length';
  if (response.toolCalls.length > 0) {
    const calls = response.toolCalls.map((call) => ({ call, args: parseArguments(call.arguments) }));
    return { kind: 'calls', calls, responseId: randomUUID(), thought: response.content, cutOff };
  }
  const text = textOf(response);
  if (cutOff) return { kind: 'cut_off', why: text === null ? 'cut_off_empty' : 'cut_off' };
  if (text === null) return { kind: 'empty' };
  return { kind: response.content?.trim() ? 'answer' : 'refused', text };
}

/**
 * The `asking` state of a turn: ask the LLM once and record the text it answered. `turn.signal`:
 * the turn's (`context.interrupts.signal(context.signal)`), aborted when the run stops or an
 * interrupt comes; its calls run under it too (after an interrupt, the turn's calls left are not run).
 */
export async function llmTurn(
  context: RunContext,
  turn: { settings: ReturnType<RunContext['settings']>; output: OutputRequirement | null; signal: AbortSignal; afterSummary?: () => Promise<boolean> },
): Promise<Reply | Extract<TurnOutcome, { kind: 'aborted' | 'interrupted' }>> {
  let response;
  try {
    response = await askLlm(context, { settings: turn.settings.llm, signal: turn.signal, output: turn.output, ...(turn.afterSummary && { afterSummary: turn.afterSummary }) });
  } catch (error) {
    if (context.signal.aborted) return { kind: 'aborted' };
    // The answer being streamed is dropped: the model answers again, the new message in view.
    if (context.interrupts.pending !== null) return { kind: 'interrupted', stopped: 'llm', toolCallIds: [], unrun: [] };
    throw error;
  }
  if (context.signal.aborted) return { kind: 'aborted' };
  const reply = replyOf(response);
  await recordReasoning(context, response, { settings: turn.settings.llm, responseId: reply.kind === 'calls' ? reply.responseId : null });
  const text = reply.kind === 'calls' ? null : textOf(response);
  if (text !== null) await context.append({ kind: 'message', source: 'agent', role: 'assistant', content: text, run_id: context.run.id });
  return reply;
}
