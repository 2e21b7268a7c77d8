import { readAsset } from '../../assets.js';
import type { AgentEvent, EventOf, NewEvent } from '../schemas/event.js';
import { planCondensation, type CondensationPlan } from './condensation-plan.js';
import type { ConversationHistory, HistoryEntry } from './conversation-history.js';
import { LlmError, type LlmClient, type LlmMessage, type LlmResponse, type LlmSettings, type LlmUsage } from './llm.js';
import { carriedBlock, isCondensedSummary, withoutCarried } from './condensation-carry.js';
import { estimateTokens } from './token-estimate.js';
import { requestHooks, type LlmRequestEvents } from './llm-request-events.js';

const CONDENSE_PROMPT = readAsset(import.meta.url, 'condense-prompt.md').trim();

export type CondenseTrigger = EventOf<'condensation'>['trigger'];
export { estimateTokens };

/** What the summary is written from: each message cut to its share of this many characters (fewer when a summary request was itself too long). */
const MAX_INPUT_CHARS = 400_000;
const MAX_MESSAGE_CHARS = 8_000;
const MIN_MESSAGE_CHARS = 300;

/** Which messages a condensation keeps: the first `keepFirst`, and at most `keepLast` at the end whose tokens fit `tailTokens`. */
export interface KeepSettings {
  keepFirst: number;
  keepLast: number;
  /** The tail's token budget (none: `keepLast` messages whatever their size). */
  tailTokens?: number | undefined;
}

export interface CondenseOptions extends KeepSettings {
  history: ConversationHistory;
  llm: LlmClient;
  settings: LlmSettings;
  trigger: CondenseTrigger;
  /** What the summary should keep in particular (POST /condense `instructions`). */
  instructions?: string | undefined;
  /** The task list as it stands (task_tracker), carried over verbatim; null when there is none. */
  taskList?: string | null;
  /** The size of the next request before the condensation, in tokens (default: the history's estimate). */
  tokensBefore?: number | undefined;
  /** How many characters of the forgotten messages the summary request may carry (shrunk when that request was itself too long). */
  maxInputChars?: number | undefined;
  signal: AbortSignal;
  runId: string | null;
  /** PreCompact hooks: the reason when one blocks, else null. */
  preCompact(input: { trigger: CondenseTrigger; instructions: string | null }): Promise<string | null>;
  append(event: NewEvent): Promise<AgentEvent>;
  /** `model`: the one that wrote the summary (a fallback, when the primary failed). */
  onUsage(usage: LlmUsage, model: string): Promise<void>;
  /** The summary request's retries and fallbacks, recorded as the run's requests' are. */
  events?: LlmRequestEvents;
}

export type CondenseResult =
  | { kind: 'condensed'; event: EventOf<'condensation'> }
  | { kind: 'nothing' }
  | { kind: 'blocked'; reason: string };

/**
 * The messages a condensation would replace now, or null. A turn whose calls are still open is
 * kept whole (it counts towards keep_last and the tail's tokens): the plan covers only what came
 * before it. The tail is the last messages that fit its token budget, at most `keepLast` of them,
 * never a tool call without its results (condensation-plan.ts moves the cut).
 */
export function planFor(history: ConversationHistory, keep: KeepSettings): CondensationPlan | null {
  const entries = history.entries();
  const settled = history.settledLength;
  const later = [...entries.slice(settled), ...history.waiting()].map((entry) => entry.seq);
  let keepLast = Math.max(0, keep.keepLast - (entries.length - settled));
  if (keep.tailTokens !== undefined) {
    let budget = keep.tailTokens - [...entries.slice(settled), ...history.waiting()].reduce((sum, entry) => sum + entry.tokens, 0);
    let fit = 0;
    for (let i = settled - 1; i >= 0 && fit < keepLast; i -= 1) {
      budget -= entries[i]!.tokens;
      if (budget < 0) break;
      fit += 1;
    }
    keepLast = fit;
  }
  return planCondensation(entries.slice(0, settled), { keepFirst: keep.keepFirst, keepLast, laterSeq: Math.min(Number.POSITIVE_INFINITY, ...later) });
}

/** The tokens a plan would take out of the next request. */
export function forgottenTokens(history: ConversationHistory, plan: CondensationPlan): number {
  return history.entries().slice(plan.start, plan.end).reduce((sum, entry) => sum + entry.tokens, 0);
}

/**
 * LLM-summary condensation: the messages between the first `keepFirst` and the tail are
 * summarized by the LLM, and a `condensation` event takes their place in the history (the fold
 * replaces them; the log keeps them). The user's messages and the task list are carried over
 * verbatim after the summary (condensation-carry.ts). PreCompact hooks run first and may block it.
 * Throws LlmError when the summary request fails, and when the LLM answers with nothing.
 */
export async function condense(options: CondenseOptions): Promise<CondenseResult> {
  const plan = planFor(options.history, options);
  if (!plan) return { kind: 'nothing' };
  const blocked = await options.preCompact({ trigger: options.trigger, instructions: options.instructions ?? null });
  if (blocked !== null) return { kind: 'blocked', reason: blocked };
  // The hooks took time: the history may have moved on (it only grows at the end while settled).
  const current = planFor(options.history, options);
  if (!current || current.fromSeq !== plan.fromSeq) return { kind: 'nothing' };
  const forgotten = options.history.entries().slice(current.start, current.end);
  // Before the summary's own usage is recorded (the fold takes it as the last prompt size).
  const tokensBefore = options.tokensBefore ?? tokensOfHistory(options.history, options.trigger);
  const events = requestHooks(options.events ?? {}, options.history.lastUserSeq);
  let response: LlmResponse;
  try {
    response = await options.llm.complete({
      settings: options.settings,
      messages: summaryRequest(forgotten, { instructions: options.instructions, maxInputChars: options.maxInputChars ?? MAX_INPUT_CHARS }),
      tools: [],
      signal: options.signal,
      ...events.hooks,
    });
  } finally {
    await events.written();
  }
  await options.onUsage(response.usage, response.model ?? options.settings.model);
  const written = response.content?.trim();
  if (!written) throw new LlmError('llm_empty_response', 'The model answered the condensation request with nothing.');
  const summary = `${written}${carriedBlock(forgotten, options.taskList ?? null)}`;
  const forgottenSum = forgotten.reduce((sum, entry) => sum + entry.tokens, 0);
  // The framing text around the summary is small next to it; the summary is what counts.
  const tokensAfter = Math.max(0, tokensBefore - forgottenSum + Math.ceil(summary.length / 4) + 60);
  const event = await options.append({
    kind: 'condensation',
    source: 'system',
    summary,
    forgotten_from_seq: current.fromSeq,
    forgotten_to_seq: current.toSeq,
    tokens_before: tokensBefore,
    tokens_after: tokensAfter,
    trigger: options.trigger,
    run_id: options.runId,
  });
  return { kind: 'condensed', event: event as EventOf<'condensation'> };
}

/** The provider's count for the last request; estimated when there is none or the provider refused the prompt. */
function tokensOfHistory(history: ConversationHistory, trigger: CondenseTrigger): number {
  const estimate = history.estimatedTokens();
  if (history.lastPromptTokens <= 0) return estimate;
  return trigger === 'context_exceeded' ? Math.max(history.lastPromptTokens, estimate) : history.lastPromptTokens;
}

function summaryRequest(forgotten: readonly HistoryEntry[], options: { instructions: string | undefined; maxInputChars: number }): LlmMessage[] {
  const { instructions } = options;
  // A smaller input (the request was too long) cuts each message shorter too.
  const perMessage = Math.floor((MAX_MESSAGE_CHARS * options.maxInputChars) / MAX_INPUT_CHARS);
  const limit = Math.max(MIN_MESSAGE_CHARS, Math.min(perMessage, Math.floor(options.maxInputChars / Math.max(forgotten.length, 1))));
  const toolNames = new Map<string, string>();
  const parts: string[] = [];
  for (const { message, seq } of forgotten) {
    switch (message.role) {
      case 'user':
        // An earlier summary is shown whole (it is short): the summariser updates it.
        if (isCondensedSummary(message)) {
          parts.push(`### Earlier summary, to update (event #${seq})\n${withoutCarried(message.content as string)}`);
          break;
        }
        parts.push(`### User (event #${seq})\n${cut(typeof message.content === 'string' ? message.content : message.content.map((part) => (part.type === 'text' ? part.text : `[image${part.path ? ` ${part.path}` : ''}]`)).join('\n\n'), limit)}`);
        break;
      case 'assistant': {
        const lines = message.content ? [cut(message.content, limit)] : [];
        for (const call of message.tool_calls ?? []) {
          toolNames.set(call.id, call.name);
          lines.push(`→ calls \`${call.name}\` ${cut(call.arguments, limit)}`);
        }
        parts.push(`### Agent (event #${seq})\n${lines.join('\n')}`);
        break;
      }
      case 'tool':
        parts.push(`### Result of \`${toolNames.get(message.tool_call_id) ?? 'a tool'}\` (event #${seq})\n${cut(message.content, limit)}`);
        break;
      default:
        break;
    }
  }
  const ask = instructions?.trim() ? `\n\n## What the summary must keep in particular\n${instructions.trim()}` : '';
  return [
    { role: 'system', content: CONDENSE_PROMPT },
    { role: 'user', content: `## The conversation to condense\n\n${parts.join('\n\n')}${ask}\n\nWrite the summary now.` },
  ];
}

/** The start and the end of a long text, with a marker where the middle was cut. */
function cut(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const half = Math.floor(limit / 2);
  return `${text.slice(0, half)}\n[… ${text.length - 2 * half} characters cut …]\n${text.slice(-half)}`;
}
