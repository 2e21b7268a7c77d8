import type { SpendVerdict } from '../access/spend-guard.js';
import type { PendingAction } from '../schemas/conversation.js';
import type { AgentEvent, NewEvent } from '../schemas/event.js';
import type { ToolContext, ToolDefinition } from '../tools/tool.js';
import type { ConversationHistory } from './conversation-history.js';
import type { LlmSettings } from './llm.js';
import type { LlmRequestContext } from './llm-request.js';
import type { Run } from './run-record.js';
import type { ToolGate } from './tool-gate.js';
import type { BudgetVerdict } from './budget-guard.js';
import type { TurnInterrupts } from './turn-interrupts.js';

export const FINISH_TOOL = 'finish';

/** How a run ends: the handler of a turn's outcome (see TurnOutcome) ends it in one of these, or starts the next turn. */
export type RunOutcome =
  | { kind: 'idle' }
  | { kind: 'finished'; message: string }
  | { kind: 'max_iterations'; limit: number }
  | { kind: 'stuck'; reason: string }
  | { kind: 'waiting_for_confirmation' }
  | { kind: 'aborted' }
  /** The database could not be reached to record the run's next step: paused, to continue once it is back. */
  | { kind: 'database_unavailable' }
  /** The owner reached their spend limit (core/access/spend-guard.ts): paused, with the reason. */
  | { kind: 'quota_exceeded'; message: string }
  /** An agent error: `code` is the LlmError's (or the runtime's own, e.g. `internal_error`). */
  | { kind: 'error'; code: string; message: string; details?: Record<string, unknown> }
  /** The run or the conversation reached its budget (`on_exceed: pause`). */
  | { kind: 'budget_exceeded'; reason: string };

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
  /** Before each LLM request: a spending limit reached (recorded as `budget_exceeded` unless a subagent of the run did), or null. */
  checkBudget?: () => BudgetVerdict | null;
  /** Before a tool call runs (a workdir checkpoint), just before its action is recorded. */
  beforeTool?: (call: { name: string; args: Record<string, unknown> }) => Promise<void>;
  /** Before each LLM request: a verdict pauses the run (the owner's spend limit). */
  spendCheck?: () => Promise<SpendVerdict | null>;
}

/** The calls in order, with `finish` moved after the others. */
export function finishLast<T>(calls: readonly T[], nameOf: (call: T) => string): T[] {
  return [...calls.filter((call) => nameOf(call) !== FINISH_TOOL), ...calls.filter((call) => nameOf(call) === FINISH_TOOL)];
}
