import { ConflictError, StorageFullError, UnprocessableError } from '../errors.js';
import type { ConversationRecord } from '../conversations/conversation-record.js';
import { CONDENSER_DEFAULTS, type CondenseBody } from '../schemas/conversation.js';
import type { AgentEvent, NewEvent } from '../schemas/event.js';
import type { AgentSession } from './agent-session.js';
import { formatTaskList, getTaskList } from '../tools/task-tracker.js';
import { condense, forgottenTokens, planFor, type CondenseOptions, type CondenseResult, type CondenseTrigger, type KeepSettings } from './condenser.js';
import { condenseThreshold } from './context-window.js';
import type { ConversationHistory } from './conversation-history.js';
import type { RequestEstimate, RunCondenser } from './llm-request.js';
import { LlmError, type LlmClient, type LlmSettings, type LlmUsage } from './llm.js';
import type { Run } from './run-record.js';
import { withFallbackKeys } from './fallback-keys.js';
import type { LlmRequestEvents } from './llm-request-events.js';
import type { ToolGate } from './tool-gate.js';

/** The condensation threshold for models whose context window is unknown, unless configured. */
export const DEFAULT_CONDENSER_MAX_TOKENS = 100_000;
/** A condensation aims the next request at this share of the threshold: one condensation buys many turns. */
const TARGET_SHARE = 0.5;
/** The summary with what it carries over (the user's messages, the task list), about. */
const SUMMARY_ALLOWANCE = 1_500;
/** An automatic condensation that would take out less than this share of the threshold is not worth a summary (the overflow ladder still runs). */
const MIN_GAIN_SHARE = 0.1;

/**
 * The tail's token budget: what is left of the target once the fixed part (system prompt, tools,
 * the first messages) and the summary are counted, never less than a tenth of the threshold;
 * halved at each `shrink` (the provider refused a request even so).
 */
export function tailBudget(threshold: number, fixed: number, shrink = 0): number {
  return Math.floor(Math.max(threshold * TARGET_SHARE - fixed - SUMMARY_ALLOWANCE, threshold * MIN_GAIN_SHARE) / 2 ** shrink);
}

/** The characters of forgotten messages a summary request may carry at each `shrink`. */
const INPUT_CHARS_BY_SHRINK = [400_000, 100_000, 25_000];

export interface CondensationControlDeps {
  llm: LlmClient;
  append(conversationId: string, event: NewEvent): Promise<AgentEvent>;
  recordUsage(record: ConversationRecord, run: Run | null, usage: LlmUsage, model: string): Promise<void>;
  /** How a summary request outside a run records its retries and fallbacks. */
  llmEvents(record: ConversationRecord, runId: string | null): LlmRequestEvents;
  /** Hooks (PreCompact) of the conversation, for a run or for a condensation outside one. */
  gateFor(record: ConversationRecord, runId: string | null, signal: AbortSignal): ToolGate;
  onError?: (error: unknown, context: Record<string, unknown>) => void;
  serverMaxTokens?: number | undefined;
}

/**
 * When and how a conversation's history is condensed: by a run before its LLM requests (past the
 * threshold, or when POST /condense asked), and on demand while no run is going.
 */
export class CondensationControl {
  constructor(private readonly deps: CondensationControlDeps) {}

  /**
   * POST /condense: while a run is in progress, it condenses before its next LLM request; else
   * the condensation starts now. 409 when there is nothing to condense or one is under way.
   */
  async request(session: AgentSession, record: ConversationRecord, body: CondenseBody): Promise<{ run_id: string | null; forgotten_from_seq: number; forgotten_to_seq: number }> {
    if (!record.llm) throw new UnprocessableError('llm_not_configured', 'This conversation has no LLM to write the summary: set `llm` with PUT /config.');
    if (session.condensing || session.condenseRequest) throw new ConflictError('condensation_in_progress', 'A condensation of this conversation is already under way.');
    const keep = keepOf(record);
    const plan = planFor(session.history, keep);
    if (!plan) {
      throw new ConflictError('nothing_to_condense', 'Nothing to condense: the LLM history holds no more than the messages condenser.keep_first and keep_last keep, or a tool call is waiting for its result.', {
        messages: session.history.entries().length,
        keep_first: keep.keepFirst,
        keep_last: keep.keepLast,
      });
    }
    const planned = { forgotten_from_seq: plan.fromSeq, forgotten_to_seq: plan.toSeq };
    if (session.active) {
      session.condenseRequest = { instructions: body.instructions };
      return { run_id: session.active.run.id, ...planned };
    }
    this.whileIdle(session, record, body.instructions);
    return { run_id: null, ...planned };
  }

  /** A run ended before it got to a POST /condense: condensed now. */
  afterRun(session: AgentSession, record: ConversationRecord): void {
    const request = session.condenseRequest;
    if (!request || session.condensing || !record.llm) return;
    session.condenseRequest = null;
    this.whileIdle(session, record, request.instructions);
  }

  /**
   * Condensation as one run sees it: due when asked for (POST /condense) or when the next request
   * would pass the threshold. `events`: the run's (its summaries' retries and fallbacks are the run's events).
   */
  forRun(options: { session: AgentSession; record: ConversationRecord; run: Run; gate: ToolGate; signal: AbortSignal; events: LlmRequestEvents }): RunCondenser {
    const { session, record } = options;
    return this.automatic({
      history: session.history,
      record,
      manual: {
        pending: () => session.condenseRequest !== null,
        take: () => {
          const request = session.condenseRequest;
          session.condenseRequest = null;
          return request;
        },
      },
      hint: 'see condenser.keep_first and keep_last',
      condense: (trigger, extra) => this.condenseHistory({ ...options, trigger, ...extra }),
    });
  }

  /**
   * A subagent's history, condensed like the conversation's (its settings, its hooks), its
   * condensation events tagged as the subagent's.
   */
  forSubagent(options: {
    history: ConversationHistory;
    toolState: Map<string, unknown>;
    record: ConversationRecord;
    llm: () => LlmSettings;
    run: Run;
    gate: ToolGate;
    signal: AbortSignal;
    append(event: NewEvent): Promise<AgentEvent>;
    onUsage(usage: LlmUsage, model: string): Promise<void>;
    events: LlmRequestEvents;
  }): RunCondenser {
    const { record } = options;
    return this.automatic({
      history: options.history,
      record,
      manual: null,
      hint: "a subagent's history is condensed with the conversation's condenser settings: give it a smaller task",
      condense: (trigger, extra) =>
        condense({
          history: options.history,
          llm: this.deps.llm,
          settings: options.llm(),
          ...keepOf(record),
          ...extra,
          trigger,
          taskList: taskListOf(options.toolState),
          signal: options.signal,
          runId: options.run.id,
          preCompact: (input) => options.gate.onPreCompact({ trigger: 'auto', instructions: input.instructions }),
          append: options.append,
          onUsage: options.onUsage,
          events: options.events,
        }),
    });
  }

  private automatic(options: {
    history: ConversationHistory;
    record: ConversationRecord;
    /** A POST /condense waiting for the run (null: none can come). */
    manual: { pending(): boolean; take(): { instructions?: string | undefined } | null } | null;
    hint: string;
    condense(trigger: CondenseTrigger, extra: Partial<Pick<CondenseOptions, 'instructions' | 'tailTokens' | 'tokensBefore' | 'maxInputChars'>>): Promise<CondenseResult>;
  }): RunCondenser {
    const { history, record } = options;
    // A hook that blocked automatic condensation is not asked again in this run.
    let autoBlocked = false;
    const threshold = () => condenseThreshold({ maxTokens: record.condenser?.max_tokens, model: record.llm?.model ?? '', serverDefault: this.deps.serverMaxTokens ?? DEFAULT_CONDENSER_MAX_TOKENS });
    const keep = (estimate: RequestEstimate, shrink: number): KeepSettings => {
      const head = history.entries().slice(0, keepOf(record).keepFirst).reduce((sum, entry) => sum + entry.tokens, 0);
      return { ...keepOf(record), tailTokens: tailBudget(threshold() / estimate.ratio, estimate.fixed + head, shrink) };
    };
    return {
      hint: options.hint,
      due: (estimate) => {
        if (options.manual?.pending()) return 'manual';
        if (record.condenser === null || autoBlocked || !record.llm) return null;
        const limit = threshold();
        if (estimate.tokens * estimate.ratio <= limit) return null;
        const plan = planFor(history, keep(estimate, 0));
        return plan && forgottenTokens(history, plan) * estimate.ratio >= limit * MIN_GAIN_SHARE ? 'auto' : null;
      },
      run: async (trigger, run = {}) => {
        const request = trigger === 'manual' ? (options.manual?.take() ?? null) : null;
        const shrink = run.shrink ?? 0;
        const sized = trigger !== 'manual' && run.estimate ? { ...keep(run.estimate, shrink), tokensBefore: Math.round(run.estimate.tokens * run.estimate.ratio) } : {};
        const result = await options.condense(trigger, { ...sized, instructions: request?.instructions, maxInputChars: INPUT_CHARS_BY_SHRINK[Math.min(shrink, INPUT_CHARS_BY_SHRINK.length - 1)] });
        if (result.kind === 'blocked' && trigger === 'auto') autoBlocked = true;
        return result;
      },
    };
  }

  /** Stops a condensation outside a run (the conversation is deleted, the server stops). */
  async stop(session: AgentSession): Promise<void> {
    session.condensing?.controller.abort();
    await session.condensing?.done;
  }

  /** A condensation outside a run: a run that starts meanwhile waits for it; a failure is an agent_error event. */
  private whileIdle(session: AgentSession, record: ConversationRecord, instructions: string | undefined): void {
    const controller = new AbortController();
    const done = (async () => {
      try {
        const gate = this.deps.gateFor(record, null, controller.signal);
        await this.condenseHistory({ session, record, run: null, gate, signal: controller.signal, trigger: 'manual', instructions, events: this.deps.llmEvents(record, null) });
      } catch (error) {
        if (controller.signal.aborted) return;
        const known = error instanceof LlmError || error instanceof StorageFullError;
        if (!known) this.deps.onError?.(error, { conversation_id: record.id, stage: 'condense' });
        const message = known ? `The condensation failed: ${error.message}` : 'The condensation stopped on an internal error.';
        await this.deps.append(record.id, { kind: 'agent_error', source: 'system', error: known ? error.code : 'internal_error', message, run_id: null }).catch(() => {});
      } finally {
        session.condensing = null;
      }
    })();
    session.condensing = { done, controller };
  }

  private condenseHistory(
    options: { session: AgentSession; record: ConversationRecord; run: Run | null; gate: ToolGate; signal: AbortSignal; trigger: CondenseTrigger; events: LlmRequestEvents } & Partial<Pick<CondenseOptions, 'instructions' | 'tailTokens' | 'tokensBefore' | 'maxInputChars'>>,
  ): Promise<CondenseResult> {
    const { session, record, run } = options;
    return condense({
      history: session.history,
      llm: this.deps.llm,
      settings: withFallbackKeys(record.llm!, record.secrets),
      ...keepOf(record),
      trigger: options.trigger,
      instructions: options.instructions,
      tailTokens: options.tailTokens,
      tokensBefore: options.tokensBefore,
      maxInputChars: options.maxInputChars,
      taskList: taskListOf(session.toolState),
      signal: options.signal,
      runId: run?.id ?? null,
      preCompact: (input) => options.gate.onPreCompact({ trigger: input.trigger === 'manual' ? 'manual' : 'auto', instructions: input.instructions }),
      append: (event) => this.deps.append(record.id, event),
      onUsage: (usage, model) => this.deps.recordUsage(record, run, usage, model),
      events: options.events,
    });
  }
}

/** The task list as the summary carries it; null when there is none. */
function taskListOf(state: Map<string, unknown>): string | null {
  const tasks = getTaskList(state);
  return tasks.length > 0 ? formatTaskList(tasks) : null;
}

function keepOf(record: ConversationRecord): { keepFirst: number; keepLast: number } {
  return { keepFirst: record.condenser?.keep_first ?? CONDENSER_DEFAULTS.keep_first, keepLast: record.condenser?.keep_last ?? CONDENSER_DEFAULTS.keep_last };
}
