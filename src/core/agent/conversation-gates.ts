import type { ConversationRecord } from '../conversations/conversation-record.js';
import { HookRunner } from '../hooks/hook-runner.js';
import type { HookTransport } from '../hooks/hook-transport.js';
import { PermissionPolicy, type PermissionsConfig } from '../permissions/permission-policy.js';
import type { SubjectReaders } from '../permissions/permission-rule.js';
import { readProjectPermissions } from '../permissions/project-settings.js';
import type { NewEvent, SubagentTags } from '../schemas/event.js';
import type { ProjectFiles } from '../workspace/project-files.js';
import { readsProject } from './tool-offer.js';
import { ToolGate } from './tool-gate.js';
import { afterThisTurn } from '../after-this-turn.js';

export interface ConversationGatesDeps {
  /** How the conversation's hooks run: commands in its sandbox, http hooks signed. */
  hookTransport: (record: ConversationRecord) => HookTransport;
  /** Reads the project's `.claude/settings.json`. */
  projectFiles: ProjectFiles;
  /** What rule checks read: bash parsed, paths resolved in the workdir. */
  readers: SubjectReaders;
  /** Keeps the project's rules with the conversation once read (they are never read again from the file the agent can rewrite). */
  keepProjectPermissions: (conversationId: string, rules: { ask: string[]; deny: string[] }) => void;
  /** Holds the project's rules for the conversation's next save to keep (ConversationStore.holdProjectPermissions). */
  holdProjectPermissions: (conversationId: string, rules: { ask: string[]; deny: string[] }) => void;
  append: (conversationId: string, event: NewEvent) => Promise<unknown>;
  onError?: ((error: unknown, context: Record<string, unknown>) => void) | undefined;
}

/** The tool gate of one run (or one of its subagents): permission rules (the client's, tightened by the project's) and hooks. */
export class ConversationGates {
  /** Project rules being read and kept, per conversation: a run's read-ahead and its first tool call share one read and one save. */
  private readonly reading = new Map<string, Promise<PermissionsConfig>>();

  constructor(private readonly deps: ConversationGatesDeps) {}

  /**
   * A run starts: the project's rules, when the conversation has not kept them yet, are read and
   * kept once its first LLM request is on its way (afterThisTurn), so that its first tool call
   * does not wait for their read and their save.
   */
  readAhead(record: ConversationRecord): void {
    if (record.project_permissions || !readsProject(record)) return;
    // A read that fails here is read again by the first tool call that needs the rules.
    afterThisTurn(() => void this.projectRules(record).catch(() => {}));
  }

  /**
   * A message that will start a run is about to be appended: the project's rules, when the
   * conversation has not kept them yet, are read now (a few file reads on the host, no process)
   * and held for its next save, so that the save of the title the message gives it keeps them
   * too. A read that fails holds nothing: the run's first tool call reads them again.
   */
  async holdBeforeRun(record: ConversationRecord): Promise<void> {
    if (record.project_permissions || !readsProject(record) || this.reading.has(record.id)) return;
    const rules = await this.read(record).catch(() => null);
    if (rules) this.deps.holdProjectPermissions(record.id, rules);
  }

  gateFor(record: ConversationRecord, runId: string | null, signal: AbortSignal, subagent?: Required<SubagentTags>): ToolGate {
    // The project's settings are read once the first LLM request is on its way (readAhead) or when the first tool call needs them, then kept with it.
    let project: Promise<PermissionsConfig | null> | null = null;
    let cached: { key: unknown[]; policy: PermissionPolicy } | null = null;
    // The config may change mid-run (confirmation mode, PUT /config): the policy follows it.
    const policy = async () => {
      project ??= readsProject(record) ? this.projectRules(record) : Promise.resolve(null);
      const projectRules = await project;
      const key = [record.permissions, record.confirmation_mode];
      if (!cached || cached.key.some((value, index) => value !== key[index])) {
        cached = { key, policy: new PermissionPolicy({ conversation: record.permissions, project: projectRules, confirmationMode: record.confirmation_mode, readers: this.deps.readers }) };
      }
      return cached.policy;
    };
    const hooks = new HookRunner({
      hooks: record.hooks ?? {},
      transport: this.deps.hookTransport(record),
      base: { conversation_id: record.id, run_id: runId, cwd: record.workdir },
      signal,
      // Hook events are recorded in call order (the log stores them in the call); a failed write is logged, never left unhandled.
      append: (event) => void this.deps.append(record.id, { ...event, ...subagent }).catch((error: unknown) => this.deps.onError?.(error, { conversation_id: record.id, run_id: runId, stage: 'hook_event' })),
    });
    return new ToolGate({ policy, hooks, workdir: record.workdir, ...(subagent && { subagent: { agent_type: subagent.agent, agent_id: subagent.parent_tool_call_id } }) });
  }

  /** The rules kept with the conversation; read from the workdir (and kept) only the first time. */
  private projectRules(record: ConversationRecord): Promise<PermissionsConfig> {
    if (record.project_permissions) return Promise.resolve(record.project_permissions);
    let reading = this.reading.get(record.id);
    if (!reading) {
      reading = this.readAndKeep(record).finally(() => this.reading.delete(record.id));
      this.reading.set(record.id, reading);
    }
    return reading;
  }

  private async readAndKeep(record: ConversationRecord): Promise<PermissionsConfig> {
    const rules = await this.read(record);
    try {
      this.deps.keepProjectPermissions(record.id, rules);
    } catch (error) {
      // Not saved (a full disk): this run still uses what was read; the next one reads again.
      this.deps.onError?.(error, { conversation_id: record.id, stage: 'project_permissions' });
    }
    return rules;
  }

  private async read(record: ConversationRecord): Promise<{ ask: string[]; deny: string[] }> {
    const read = await readProjectPermissions(this.deps.projectFiles, record.workdir);
    return { ask: read.ask ?? [], deny: read.deny ?? [] };
  }
}
