import type { ConversationRecord } from '../conversations/conversation-record.js';
import type { ConversationStore } from '../conversations/conversation-store.js';
import type { EventRecorder } from '../events/event-recorder.js';
import type { ConversationStatus, NewEvent, SubagentTags } from '../schemas/event.js';
import type { LlmRetry, LlmUsage } from './llm.js';
import type { LlmRequestEvents } from './llm-request-events.js';
import type { Run } from './run-record.js';
import type { PriceTable } from './price-table.js';
import { addUsageTo, zeroUsage } from '../schemas/usage.js';

export interface RunJournalDeps {
  conversations: ConversationStore;
  recorder: EventRecorder;
  /** Gives a cost to usage that has none (no provider figure, no per-token prices in the settings). */
  prices?: PriceTable;
  /** Each retry of an LLM request, besides its event (the server's log). */
  onLlmRetry?: ((retry: LlmRetry, context: { conversation_id: string; run_id: string | null }) => void) | undefined;
}

/**
 * What the runtime writes about a conversation: its events, its status transitions (each with the
 * `state_update` that says why) and the usage of its LLM calls.
 */
export class RunJournal {
  constructor(private readonly deps: RunJournalDeps) {}

  append(conversationId: string, event: NewEvent) {
    return this.deps.recorder.append(conversationId, event);
  }

  /** Streaming-only text of the answer being written (never stored). */
  delta(conversationId: string, runId: string, text: string, tags: SubagentTags = {}): void {
    this.deps.recorder.delta({ kind: 'message_delta', conversation_id: conversationId, run_id: runId, content_delta: text, ...tags });
  }

  /** Streaming-only reasoning of the answer being written (never stored). */
  reasoningDelta(conversationId: string, runId: string, text: string, tags: SubagentTags = {}): void {
    this.deps.recorder.delta({ kind: 'reasoning_delta', conversation_id: conversationId, run_id: runId, content_delta: text, ...tags });
  }

  async setStatus(record: Readonly<ConversationRecord>, status: ConversationStatus, options: { runId?: string | null; reason?: string } = {}): Promise<void> {
    this.deps.conversations.setStatus(record.id, status, options.runId ?? null);
    await this.append(record.id, { kind: 'state_update', source: 'system', status, run_id: options.runId ?? null, reason: options.reason ?? null });
  }

  /** A run starts: the conversation is running it (see ConversationStore.startRunning), with the `state_update` that says so. */
  async startRunning(record: Readonly<ConversationRecord>, runId: string): Promise<void> {
    this.deps.conversations.startRunning(record.id, runId);
    await this.append(record.id, { kind: 'state_update', source: 'system', status: 'running', run_id: runId, reason: null });
  }

  /**
   * How an LLM request of the conversation records its retries and fallbacks: as `llm_retry` and
   * `llm_fallback` events of the run (none: a condensation between runs), tagged as a subagent's
   * when one asked.
   */
  llmEvents(record: Readonly<ConversationRecord>, runId: string | null, tags: SubagentTags = {}): Required<Pick<LlmRequestEvents, 'onLlmRetry' | 'onLlmFallback'>> {
    return {
      onLlmRetry: (retry) => {
        this.deps.onLlmRetry?.(retry, { conversation_id: record.id, run_id: runId });
        const model = retry.model ?? record.llm?.model ?? 'unknown';
        return this.append(record.id, { kind: 'llm_retry', source: 'system', model, reason: retry.reason ?? retry.code.replace(/^llm_/, ''), wait_s: retry.delayMs / 1000, run_id: runId, ...tags });
      },
      onLlmFallback: (fallback) =>
        this.append(record.id, { kind: 'llm_fallback', source: 'system', from_model: fallback.fromModel, to_model: fallback.toModel, reason: fallback.reason, attempt: fallback.attempt, run_id: runId, ...tags }),
    };
  }

  /** Usage of one LLM answer: added to the conversation's and the run's (and a subagent's share), recorded as a `usage` event. */
  async recordUsage(record: Readonly<ConversationRecord>, run: Run | null, reported: LlmUsage, tags: SubagentTags = {}, model?: string): Promise<void> {
    const usage = model !== undefined && this.deps.prices ? this.deps.prices.priced(reported, model) : reported;
    if (run) {
      addUsageTo(run.usage, usage, model);
      if (model !== undefined && !(run.models_used ??= []).includes(model)) run.models_used.push(model);
      if (tags.agent !== undefined) {
        run.usage_by_agent ??= {};
        addUsageTo((run.usage_by_agent[tags.agent] ??= zeroUsage()), usage);
      }
    }
    const totals = this.deps.conversations.addUsage(record.id, usage, model);
    const byModel = totals.by_model && Object.fromEntries(Object.entries(totals.by_model).map(([name, counts]) => [name, { ...counts }]));
    await this.append(record.id, { kind: 'usage', source: 'system', ...usageFields(usage), ...(model !== undefined && { model }), totals: { ...totals, ...(byModel && { by_model: byModel }) }, run_id: run?.id ?? null, ...tags });
  }
}

/** The call's own counts as the event shows them: null each when the provider reported none (unknown, never zeros). */
function usageFields(usage: LlmUsage) {
  const { unknown, ...counts } = usage;
  if (!unknown) return counts;
  return { prompt_tokens: null, completion_tokens: null, cost: null, cached_tokens: null, reasoning_tokens: null };
}
