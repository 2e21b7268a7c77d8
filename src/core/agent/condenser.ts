import { readAsset } from '../../assets.js';
import type { AgentEvent, EventOf, NewEvent } from '../schemas/event.js';
import { planCondensation, type CondensationPlan } from './condensation-plan.js';
import type { ConversationHistory, HistoryEntry } from './conversation-history.js';
import { LlmError, type LlmClient, type LlmMessage, type LlmSettings, type LlmUsage } from './llm.js';

const CONDENSE_PROMPT = readAsset(import.meta.url, 'condense-prompt.md').trim();

export type CondenseTrigger = EventOf<'condensation'>['trigger'];

/** What the summary is written from: each message cut to its share of this many characters. */
const MAX_INPUT_CHARS = 400_000;
const MAX_MESSAGE_CHARS = 8_000;
const MIN_MESSAGE_CHARS = 600;

export interface CondenseOptions {
  history: ConversationHistory;
  llm: LlmClient;
  settings: LlmSettings;
  keepFirst: number;
  keepLast: number;
  trigger: CondenseTrigger;
  /** What the summary should keep in particular (POST /condense `instructions`). */
  instructions?: string | undefined;
  signal: AbortSignal;
  runId: string | null;
  /** PreCompact hooks: the reason when one blocks, else null. */
  preCompact(input: { trigger: CondenseTrigger; instructions: string | null }): Promise<string | null>;
  append(event: NewEvent): Promise<AgentEvent>;
  onUsage(usage: LlmUsage): Promise<void>;
}

export type CondenseResult =
  | { kind: 'condensed'; event: EventOf<'condensation'> }
  | { kind: 'nothing' }
  | { kind: 'blocked'; reason: string };

/**
 * The messages a condensation would replace now, or null. A turn whose calls are still open is
 * kept whole (it counts towards keep_last): the plan covers only what came before it.
 */
export function planFor(history: ConversationHistory, keep: { keepFirst: number; keepLast: number }): CondensationPlan | null {
  const entries = history.entries();
  const settled = history.settledLength;
  const later = [...entries.slice(settled), ...history.waiting()].map((entry) => entry.seq);
  return planCondensation(entries.slice(0, settled), { keepFirst: keep.keepFirst, keepLast: Math.max(0, keep.keepLast - (entries.length - settled)), laterSeq: Math.min(Number.POSITIVE_INFINITY, ...later) });
}

/**
 * LLM-summary condensation: the messages between the first `keepFirst` and the last `keepLast`
 * are summarized by the LLM, and a `condensation` event takes their place in the history (the
 * fold replaces them; the log keeps them). PreCompact hooks run first and may block it.
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
  const tokensBefore = tokensOfHistory(options.history, options.trigger);
  const response = await options.llm.complete({
    settings: options.settings,
    messages: summaryRequest(forgotten, options.instructions),
    tools: [],
    signal: options.signal,
  });
  await options.onUsage(response.usage);
  const summary = response.content?.trim();
  if (!summary) throw new LlmError('llm_empty_response', 'The model answered the condensation request with nothing.');
  const forgottenTokens = forgotten.reduce((sum, entry) => sum + estimateTokens(entry.message), 0);
  // The framing text around the summary is small next to it; the summary is what counts.
  const tokensAfter = Math.max(0, tokensBefore - forgottenTokens + Math.ceil(summary.length / 4) + 40);
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
  const estimate = history.snapshot().reduce((sum, message) => sum + estimateTokens(message), 0);
  if (history.lastPromptTokens <= 0) return estimate;
  return trigger === 'context_exceeded' ? Math.max(history.lastPromptTokens, estimate) : history.lastPromptTokens;
}

/** About 4 characters a token, plus a few for the message's framing. */
export function estimateTokens(message: LlmMessage): number {
  // An image counts as about 1,000 tokens (a typical tile budget), its text as ~4 characters a token.
  let chars = typeof message.content === 'string' ? message.content.length : message.role === 'user' ? message.content.reduce((sum, part) => sum + (part.type === 'text' ? part.text.length : 4000), 0) : 0;
  if (message.role === 'assistant') for (const call of message.tool_calls ?? []) chars += call.name.length + call.arguments.length;
  return Math.ceil(chars / 4) + 4;
}

function summaryRequest(forgotten: readonly HistoryEntry[], instructions: string | undefined): LlmMessage[] {
  const limit = Math.max(MIN_MESSAGE_CHARS, Math.min(MAX_MESSAGE_CHARS, Math.floor(MAX_INPUT_CHARS / Math.max(forgotten.length, 1))));
  const toolNames = new Map<string, string>();
  const parts: string[] = [];
  for (const { message, seq } of forgotten) {
    switch (message.role) {
      case 'user':
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
