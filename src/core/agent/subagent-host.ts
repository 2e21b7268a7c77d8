import type { Clock } from '../clock.js';
import type { ConversationRecord } from '../conversations/conversation-record.js';
import type { ConversationStore } from '../conversations/conversation-store.js';
import type { ShellFactory } from '../tools/shell-session.js';
import type { ProjectFiles } from '../workspace/project-files.js';
import type { WorkdirFileSystem } from '../workspace/workdir-file-system.js';
import type { ActiveRun, AgentSession } from './agent-session.js';
import type { RunSpendChecks } from './budget-guard.js';
import type { CondensationControl } from './condensation-control.js';
import type { ConversationGates } from './conversation-gates.js';
import type { LlmClient } from './llm.js';
import type { RunJournal } from './run-journal.js';
import type { SubagentHost } from './subagent-runner.js';
import { withFallbackKeys } from './fallback-keys.js';
import { readProjectContext } from './project-instructions.js';
import { subagentSystemPrompt } from './subagent-prompt.js';
import { readsProject, type ToolOffer } from './tool-offer.js';

export interface SubagentHostsDeps {
  conversations: ConversationStore;
  llm: LlmClient;
  workdirFs: WorkdirFileSystem;
  projectFiles: ProjectFiles;
  shells: ShellFactory;
  shellEnv: (record: ConversationRecord) => Record<string, string>;
  journal: RunJournal;
  gates: ConversationGates;
  offer: ToolOffer;
  clock: Clock;
  condensation: CondensationControl;
}

/** How long a stopped run waits for its subagents to wind down before it settles. */
const SUBAGENT_SETTLE_MS = 10_000;

/** What the subagents started in a run share with it: the conversation, the run's signal, catalog, rules and hooks. */
export class SubagentHosts {
  constructor(private readonly deps: SubagentHostsDeps) {}

  /** `checks`: the run's own (a subagent's spending is the run's, under the same budget and owner's limit). */
  hostFor(record: ConversationRecord, of: { session: AgentSession; active: ActiveRun; checks: RunSpendChecks }): SubagentHost {
    const { conversations, journal, gates, offer, clock } = this.deps;
    const { session, active } = of;
    const { run, controller } = active;
    // A fallback's `${NAME}` key read from the conversation's secrets at each request, as the run's are.
    const llmSettings = () => withFallbackKeys(record.llm!, record.secrets);
    return {
      conversationId: record.id,
      workdir: record.workdir,
      workdirFs: this.deps.workdirFs,
      session,
      run,
      signal: controller.signal,
      catalog: active.catalog,
      llm: this.deps.llm,
      maxDepth: offer.maxSubagentDepth,
      allowedModels: offer.subagentModels,
      settings: () => ({ llm: llmSettings(), maxIterations: record.max_iterations_per_run, confirmationMode: record.confirmation_mode }),
      startShell: (child) => child.shell(this.deps.shells, { workdir: record.workdir, env: () => this.deps.shellEnv(record), sandbox: conversations.sandboxOf(record) }),
      append: async (event) => (await journal.append(record.id, event)).event,
      delta: (text, tags) => journal.delta(record.id, run.id, text, tags),
      reasoningDelta: (text, tags) => journal.reasoningDelta(record.id, run.id, text, tags),
      onUsage: (usage, tags, model) => journal.recordUsage(record, run, usage, tags, model),
      checks: of.checks,
      llmEvents: (tags) => journal.llmEvents(record, run.id, tags),
      gate: (tags) => gates.gateFor(record, run.id, controller.signal, tags),
      schemasOf: (tools) => offer.schemasOf(tools),
      condenser: (child, { tags, gate, events }) =>
        this.deps.condensation.forSubagent({
          history: child.history,
          toolState: child.toolState,
          record,
          llm: llmSettings,
          run,
          gate,
          signal: controller.signal,
          append: async (event) => (await journal.append(record.id, { ...event, ...tags })).event,
          onUsage: (usage, model) => journal.recordUsage(record, run, usage, tags, model),
          events,
        }),
      systemPrompt: async (agent, tools) => {
        const project = await readProjectContext({ projectFiles: this.deps.projectFiles, workdir: record.workdir, instructions: readsProject(record) });
        return subagentSystemPrompt({ agent, tools, workdir: record.workdir, secretNames: Object.keys(record.secrets), now: new Date(clock.now()), project, catalog: active.catalog });
      },
      track: (done) => {
        const tracked = done.catch(() => undefined).finally(() => active.subagents.delete(tracked));
        active.subagents.add(tracked);
      },
    };
  }
}

/** The run settles once its subagents have wound down (they stop with the run's signal), or after a bound. */
export async function settleSubagents(active: ActiveRun): Promise<void> {
  if (active.subagents.size === 0) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.allSettled([...active.subagents]), new Promise((resolve) => (timer = setTimeout(resolve, SUBAGENT_SETTLE_MS)))]);
  clearTimeout(timer);
}
