import type { AgentEvent } from '../schemas/event.js';
import type { LlmToolCall } from './llm.js';
import type { RunContext } from './run-context.js';
import type { ParsedArguments } from './tool-executor.js';

// How the loop writes down what happened: actions, notes to the model, calls answered without running, interrupts.

/** What the model reads for a call it made beside `finish`. */
export const FINISH_NOT_ALONE =
  'Not run: `finish` was called in the same reply as other tool calls, so you had not seen their results. Their results are above: check them, and call `finish` alone in a reply of its own if the task is done.';

export const INTERRUPTED_NOT_RUN = 'Not run: the user interrupted this turn with a new message (below). Read it before doing anything else.';

export const CUT_CALL_RESULT =
  'Not run: your response was cut off at the output token limit before the arguments of this call were complete. Make the call again with shorter arguments (write a large file in several parts).';

/** Takes a pending interrupt and records what it stopped; nothing when none is pending. */
export async function recordInterrupt(context: RunContext, stopped: 'tool' | 'llm' | 'none', toolCallIds: string[]): Promise<void> {
  const messageSeq = context.interrupts.take();
  if (messageSeq === null) return;
  await context.append({ kind: 'interrupt', source: 'user', run_id: context.run.id, message_seq: messageSeq, stopped, tool_call_ids: toolCallIds });
}

/** The action the model asked for, recorded before it runs (or is refused). */
export function recordAction(context: RunContext, options: { call: LlmToolCall; args: ParsedArguments; original?: Record<string, unknown> | null; responseId: string; thought: string | null }): Promise<AgentEvent> {
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

/** A note to the model: a `message` from `system` in the user's role. */
export async function appendNote(context: RunContext, content: string): Promise<void> {
  await context.append({ kind: 'message', source: 'system', role: 'user', content, run_id: context.run.id });
}

/** A recorded call answered without running it: the model reads why. */
export async function recordNotRun(context: RunContext, call: LlmToolCall, content: string, error: string): Promise<null> {
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
