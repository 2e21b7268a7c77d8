import { ConflictError, StorageFullError, UnprocessableError } from '../errors.js';
import type { ConversationRecord } from '../conversations/conversation-record.js';
import { CONDENSER_DEFAULTS, type CondenseBody } from '../schemas/conversation.js';
import type { AgentEvent, NewEvent } from '../schemas/event.js';
import type { AgentSession } from './agent-session.js';
import { condense, planFor, type CondenseResult, type CondenseTrigger } from './condenser.js';
import { condenseThreshold } from './context-window.js';
import type { RunCondenser } from './llm-request.js';
import { LlmError, type LlmClient, type LlmUsage } from './llm.js';
import type { Run } from './run-record.js';
import type { ToolGate } from './tool-gate.js';

/** The condensation threshold for models whose context window is unknown, unless configured. */
export const DEFAULT_CONDENSER_MAX_TOKENS = 100_000;

export interface CondensationControlDeps {
  llm: LlmClient;
  append(conversationId: string, event: NewEvent): Promise<AgentEvent>;
  recordUsage(record: ConversationRecord, run: Run | null, usage: LlmUsage): Promise<void>;
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

  /** Condensation as one run sees it: due when asked for (POST /condense) or when the last prompt passed the threshold. */
  forRun(options: { session: AgentSession; record: ConversationRecord; run: Run; gate: ToolGate; signal: AbortSignal }): RunCondenser {
    const { session, record } = options;
    // A hook that blocked automatic condensation is not asked again in this run.
    let autoBlocked = false;
    return {
      due: () => {
        if (session.condenseRequest) return 'manual';
        if (record.condenser === null || autoBlocked || !record.llm) return null;
        const threshold = condenseThreshold({ maxTokens: record.condenser?.max_tokens, model: record.llm.model, serverDefault: this.deps.serverMaxTokens ?? DEFAULT_CONDENSER_MAX_TOKENS });
        return session.history.lastPromptTokens > threshold ? 'auto' : null;
      },
      run: async (trigger) => {
        const request = trigger === 'manual' ? session.condenseRequest : null;
        session.condenseRequest = null;
        const result = await this.condenseHistory({ ...options, trigger, instructions: request?.instructions });
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
        await this.condenseHistory({ session, record, run: null, gate, signal: controller.signal, trigger: 'manual', instructions });
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

  private condenseHistory(options: { session: AgentSession; record: ConversationRecord; run: Run | null; gate: ToolGate; signal: AbortSignal; trigger: CondenseTrigger; instructions?: string | undefined }): Promise<CondenseResult> {
    const { session, record, run } = options;
    return condense({
      history: session.history,
      llm: this.deps.llm,
      settings: record.llm!,
      ...keepOf(record),
      trigger: options.trigger,
      instructions: options.instructions,
      signal: options.signal,
      runId: run?.id ?? null,
      preCompact: (input) => options.gate.onPreCompact({ trigger: input.trigger === 'manual' ? 'manual' : 'auto', instructions: input.instructions }),
      append: (event) => this.deps.append(record.id, event),
      onUsage: (usage) => this.deps.recordUsage(record, run, usage),
    });
  }
}

function keepOf(record: ConversationRecord): { keepFirst: number; keepLast: number } {
  return { keepFirst: record.condenser?.keep_first ?? CONDENSER_DEFAULTS.keep_first, keepLast: record.condenser?.keep_last ?? CONDENSER_DEFAULTS.keep_last };
}
