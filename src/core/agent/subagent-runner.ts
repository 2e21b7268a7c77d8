import { DatabaseUnavailableError } from '../errors.js';
import { GENERAL_PURPOSE_AGENT, type AgentDefinition, type ProjectCatalog } from '../catalog/project-catalog.js';
import type { AgentEvent, NewEvent, SubagentTags } from '../schemas/event.js';
import type { ShellSession } from '../tools/shell-session.js';
import { TASK_TOOL_NAME } from '../tools/task.js';
import type { SubagentRequest, ToolDefinition, ToolResult } from '../tools/tool.js';
import { AgentSession } from './agent-session.js';
import { LlmError, type LlmClient, type LlmSettings, type LlmToolSchema, type LlmUsage } from './llm.js';
import type { Run } from './run-record.js';
import { TurnInterrupts } from './turn-interrupts.js';
import type { RunCondenser } from './llm-request.js';
import type { RunOutcome } from './run-context.js';
import type { RunSpendChecks } from './budget-guard.js';
import type { LlmRequestEvents } from './llm-request-events.js';
import { executeRun } from './run-loop.js';
import type { ToolGate } from './tool-gate.js';
import type { WorkdirFileSystem } from '../workspace/workdir-file-system.js';

/** What a subagent gets from the run that starts it (the runtime builds it once per run). */
export interface SubagentHost {
  conversationId: string;
  workdir: string;
  workdirFs: WorkdirFileSystem;
  /** The conversation's session: every subagent's session is registered in its `children`. */
  session: AgentSession;
  run: Run;
  signal: AbortSignal;
  catalog: ProjectCatalog;
  llm: LlmClient;
  /** How many levels of subagents may run below the main agent (1: subagents start no subagents). */
  maxDepth: number;
  /** Models a workdir's agent file may pick besides the conversation's own (AGENTD_SUBAGENT_MODELS). */
  allowedModels: readonly string[];
  settings: () => { llm: LlmSettings; maxIterations: number; confirmationMode: boolean };
  startShell: (session: AgentSession) => Promise<ShellSession>;
  append: (event: NewEvent) => Promise<AgentEvent>;
  delta: (text: string, tags: SubagentTags) => void;
  reasoningDelta?: (text: string, tags: SubagentTags) => void;
  /** `model`: the one that answered (a fallback, or the model its agent file picked). */
  onUsage: (usage: LlmUsage, tags: Required<SubagentTags>, model?: string) => Promise<void>;
  /** The run's budget and owner's spend checks: a subagent stops within one request of a limit, as its run does. */
  checks: RunSpendChecks;
  /** How its LLM requests record their retries and fallbacks (tagged as its events). */
  llmEvents: (tags: Required<SubagentTags>) => LlmRequestEvents;
  /** The permission rules and hooks of the conversation, for a subagent (SubagentStop at its end, hook events tagged). */
  gate: (tags: Required<SubagentTags>) => ToolGate;
  schemasOf: (tools: readonly ToolDefinition[]) => LlmToolSchema[];
  /** Condenses the subagent's own history as the conversation's is (its events tagged as the subagent's; `events`: its requests'). */
  condenser: (child: AgentSession, options: { tags: Required<SubagentTags>; gate: ToolGate; events: LlmRequestEvents }) => RunCondenser;
  systemPrompt: (agent: AgentDefinition, tools: readonly string[]) => Promise<string>;
  /** A subagent that outlives its task call (the run was stopped while it wound down): the run waits for it. */
  track: (done: Promise<unknown>) => void;
}

/** Names Claude Code gives its tools in an agent's `tools`, as agentd's. */
const CLAUDE_TOOL_NAMES: Record<string, string> = {
  Bash: 'bash',
  Read: 'file_editor',
  Edit: 'file_editor',
  MultiEdit: 'file_editor',
  Write: 'file_editor',
  Glob: 'glob',
  Grep: 'grep',
  LS: 'glob',
  TodoWrite: 'task_tracker',
  Task: 'task',
  Skill: 'skill',
  SlashCommand: 'slash_command',
};

const INTERRUPTED = 'Interrupted: the subagent stopped before this tool call completed.';
/** Tools a subagent never gets: nobody answers a subagent's questions (as in Claude Code). */
const NEVER_IN_SUBAGENTS: ReadonlySet<string> = new Set(['ask_user']);

/**
 * Runs one subagent to completion for a `task` call: a child run of the same loop, with its own
 * history (its events are in the conversation's log, tagged with the call id and its name), its
 * own shell and tool state, the tools its definition names (never more than its parent's), the
 * conversation's permission rules and hooks. Its final text is the call's result.
 */
export async function runSubagent(host: SubagentHost, parentTools: ReadonlyMap<string, ToolDefinition>, depth: number, request: SubagentRequest): Promise<ToolResult> {
  const type = request.subagent_type ?? GENERAL_PURPOSE_AGENT;
  const definition = host.catalog.agents.find((agent) => agent.name === type);
  if (!definition) {
    return { isError: true, content: `There is no subagent type "${type}". Available: ${host.catalog.agents.map((agent) => agent.name).join(', ')}.`, data: { error: 'unknown_subagent_type' } };
  }
  const tags = { parent_tool_call_id: request.toolCallId, agent: definition.name };
  const refusedModel = refusedModelOf(definition, host.settings().llm.model, host.allowedModels);
  const tools = childTools(definition, parentTools, depth + 1 < host.maxDepth);
  const toolList = [...tools.values()];
  const child = new AgentSession(host.conversationId, { agent: definition.name, shellId: `${host.conversationId}/${request.toolCallId}`, codec: host.llm.codec });
  host.session.children.set(request.toolCallId, child);
  let lastText: string | null = null;
  const append = async (event: NewEvent) => {
    const stored = await host.append({ ...event, ...tags });
    // Its task arrives as a message from the agent too, with role user: only its own replies count.
    if (stored.kind === 'message' && stored.source === 'agent' && stored.role === 'assistant') lastText = stored.content;
    return stored;
  };
  const childRun: Run = { ...host.run, iterations: 0, usage: { prompt_tokens: 0, completion_tokens: 0, cost: 0 } };
  let pending: { tool_call_id: string; tool_name: string }[] = [];
  const work = (async (): Promise<{ outcome: RunOutcome }> => {
    await append({ kind: 'system_prompt', source: 'system', content: await host.systemPrompt(definition, toolList.map((tool) => tool.name)), tools: host.schemasOf(toolList) as unknown as Record<string, unknown>[] });
    await append({ kind: 'message', source: 'agent', role: 'user', content: request.prompt, run_id: host.run.id });
    const gate = host.gate(tags);
    // Its own routing state, shared with its condensations: a `sticky` fallback holds for the subagent's run, a `turn` one for its task.
    const llmEvents: LlmRequestEvents = { ...host.llmEvents(tags), routing: { turn: 0 } };
    try {
      const outcome = await executeRun({
        gate,
        sessionStart: false,
        conversationId: host.conversationId,
        run: childRun,
        signal: host.signal,
        history: child.history,
        llm: host.llm,
        settings: () => {
          const settings = host.settings();
          return definition.model && definition.model !== 'inherit' && refusedModel === null ? { ...settings, llm: { ...settings.llm, model: definition.model } } : settings;
        },
        tools,
        toolSchemas: host.schemasOf(toolList),
        toolContext: {
          conversationId: host.conversationId,
          workdir: host.workdir,
          workdirFs: host.workdirFs,
          signal: host.signal,
          state: child.toolState,
          shell: () => host.startShell(child),
          catalog: host.catalog,
          ...(tools.has(TASK_TOOL_NAME) && { runSubagent: (next: SubagentRequest) => runSubagent(host, tools, depth + 1, next) }),
        },
        append,
        delta: (text) => host.delta(text, tags),
        ...(host.reasoningDelta && { reasoningDelta: (text: string) => host.reasoningDelta!(text, tags) }),
        onUsage: (usage, model) => host.onUsage(usage, tags, model),
        ...host.checks,
        ...llmEvents,
        onIteration: () => void (childRun.iterations += 1),
        setPendingActions: (actions) => void (pending = actions),
        approved: [],
        // A subagent takes no messages (nothing interrupts it); its history is condensed like the conversation's.
        interrupts: new TurnInterrupts(),
        condenser: host.condenser(child, { tags, gate, events: llmEvents }),
      });
      return { outcome };
    } catch (error) {
      if (host.signal.aborted) return { outcome: { kind: 'aborted' } };
      if (error instanceof LlmError) return { outcome: { kind: 'error', code: error.code, message: error.message } };
      throw error;
    } finally {
      await closeCalls(child, append, pending).catch(() => undefined);
      await child.closeShell().catch(() => undefined);
    }
  })();
  host.track(work);
  const { outcome } = await work;
  const done = result(outcome, { definition, iterations: childRun.iterations, lastText, pending });
  if (refusedModel === null) return done;
  const note = `[agentd: the agent file ${definition.path} asks for the model "${refusedModel}", which the operator does not allow (AGENTD_SUBAGENT_MODELS); it ran on the conversation's model.]`;
  return { ...done, content: `${note}\n\n${done.content}`, data: { ...done.data, model_refused: refusedModel } };
}

/**
 * The model a workdir's agent file asks for when the operator does not allow it, else null: a
 * cloned repository's files must not spend the operator's key on another model (the client's own
 * `agents` may, as the client sets the conversation's model anyway).
 */
export function refusedModelOf(definition: AgentDefinition, conversationModel: string, allowed: readonly string[]): string | null {
  const model = definition.model;
  if (!model || model === 'inherit' || definition.source !== 'path' || model === conversationModel) return null;
  return allowed.includes(model) || allowed.includes('*') ? null : model;
}

/** The subagent's tools: those its definition names (Claude Code's names understood), all of its parent's when it names none. */
function childTools(definition: AgentDefinition, parentTools: ReadonlyMap<string, ToolDefinition>, mayDelegate: boolean): Map<string, ToolDefinition> {
  const wanted = definition.tools?.map((name) => CLAUDE_TOOL_NAMES[name] ?? name) ?? null;
  const out = new Map<string, ToolDefinition>();
  for (const [name, tool] of parentTools) {
    if ((name === TASK_TOOL_NAME && !mayDelegate) || NEVER_IN_SUBAGENTS.has(name)) continue;
    if (wanted && !wanted.some((pattern) => (pattern.endsWith('*') ? name.startsWith(pattern.slice(0, -1)) : pattern === name))) continue;
    out.set(name, tool);
  }
  return out;
}

/** Every call the subagent left open is answered (its history stays valid, the log shows why). */
async function closeCalls(child: AgentSession, append: (event: NewEvent) => Promise<AgentEvent>, pending: { tool_call_id: string; tool_name: string }[]): Promise<void> {
  for (const action of pending) {
    await append({ kind: 'rejection', source: 'system', tool_call_id: action.tool_call_id, tool_name: action.tool_name, reason: 'This call needs the user\'s approval, which a subagent cannot wait for' });
  }
  for (const callId of child.history.pendingCallIds) {
    await append({ kind: 'observation', source: 'environment', tool_call_id: callId, tool_name: child.history.toolNameOf(callId) ?? 'unknown', content: INTERRUPTED, is_error: true, data: { interrupted: true } });
  }
}

function result(
  outcome: RunOutcome,
  facts: { definition: AgentDefinition; iterations: number; lastText: string | null; pending: { tool_name: string }[] },
): ToolResult {
  const data = { agent: facts.definition.name, outcome: outcome.kind, iterations: facts.iterations };
  const said = facts.lastText ? `\n\nIts last reply:\n${facts.lastText}` : '';
  switch (outcome.kind) {
    case 'idle':
      return { isError: false, content: facts.lastText ?? '(The subagent ended without a reply.)', data };
    case 'finished':
      return { isError: false, content: outcome.message, data };
    case 'aborted':
      return { isError: true, content: `Interrupted: the run was stopped while the subagent was working.${said}`, data: { ...data, interrupted: true } };
    case 'waiting_for_confirmation':
      return { isError: true, content: `The subagent stopped: its call(s) to ${facts.pending.map((action) => action.tool_name).join(', ')} need the user's approval, which a subagent cannot wait for. Make such calls yourself if they are needed.${said}`, data };
    case 'max_iterations':
      return { isError: true, content: `The subagent stopped after ${outcome.limit} steps without finishing.${said}`, data };
    case 'stuck':
      return { isError: true, content: `The subagent stopped: ${outcome.reason}${said}`, data };
    case 'budget_exceeded':
      return { isError: true, content: `The subagent stopped: ${outcome.reason}${said}`, data };
    case 'quota_exceeded':
      return { isError: true, content: `The subagent stopped: ${outcome.message}${said}`, data };
    case 'database_unavailable':
      // The parent's run pauses too: nothing of it can be recorded either.
      throw new DatabaseUnavailableError();
    case 'error':
      return { isError: true, content: `The subagent failed: ${outcome.message}${said}`, data: { ...data, error: outcome.code } };
  }
}
