import type { HookRunner } from '../hooks/hook-runner.js';
import type { PermissionPolicy } from '../permissions/permission-policy.js';

/** What the gate decided for one tool call. `args` is what runs (a PreToolUse hook may have rewritten it). */
export type GateVerdict =
  | { kind: 'run'; args: Record<string, unknown>; original: Record<string, unknown> | null }
  | { kind: 'ask'; args: Record<string, unknown>; original: Record<string, unknown> | null }
  | { kind: 'deny'; args: Record<string, unknown>; original: Record<string, unknown> | null; reason: string; rule?: string; hookPoint?: string };

/**
 * The one gate every tool call passes before it runs (built-in, MCP, subagent tools alike), and
 * the hooks around a run: PreToolUse hooks first (they may block, ask or rewrite the input), then
 * the permission rules on the input that will run; PostToolUse after; UserPromptSubmit, Stop and
 * SessionStart at their points.
 */
export class ToolGate {
  static readonly MAX_STOP_CONTINUATIONS = 3;
  private stopContinuations = 0;

  constructor(
    private readonly options: {
      policy: () => Promise<PermissionPolicy>;
      hooks: HookRunner;
      workdir: string;
      /** A subagent's gate: its end runs SubagentStop hooks (with these fields) instead of Stop. */
      subagent?: { agent_type: string; agent_id: string };
    },
  ) {}

  async beforeTool(call: { id: string; name: string; args: Record<string, unknown> }): Promise<GateVerdict> {
    let args = call.args;
    let original: Record<string, unknown> | null = null;
    let hookAsked = false;
    if (this.options.hooks.has('PreToolUse')) {
      const outcome = await this.options.hooks.run({ point: 'PreToolUse', toolName: call.name, toolCallId: call.id, fields: { tool_input: call.args } });
      if (outcome.updatedInput) {
        original = call.args;
        args = outcome.updatedInput;
      }
      if (outcome.blocked !== null) return { kind: 'deny', args, original, reason: `Blocked by a PreToolUse hook: ${outcome.blocked}`, hookPoint: 'PreToolUse' };
      hookAsked = outcome.ask;
    }
    const verdict = await (await this.options.policy()).check(call.name, args, this.options.workdir);
    if (verdict.decision === 'deny') return { kind: 'deny', args, original, ...denial(verdict) };
    if (verdict.decision === 'ask' || hookAsked) return { kind: 'ask', args, original };
    return { kind: 'run', args, original };
  }

  /**
   * An action the user approved while it waited: its `ask` is answered, but the rules are read
   * again, as they are now (a deny rule added since, by PUT /config or the project's settings,
   * still refuses it). Its PreToolUse hooks ran when it was proposed.
   */
  async beforeApproved(call: { name: string; args: Record<string, unknown> }): Promise<{ kind: 'run' } | { kind: 'deny'; reason: string; rule?: string }> {
    const verdict = await (await this.options.policy()).check(call.name, call.args, this.options.workdir);
    return verdict.decision === 'deny' ? { kind: 'deny', ...denial(verdict) } : { kind: 'run' };
  }

  /** PostToolUse: context or a block reason the model sees after the result, or null. */
  async afterTool(call: { id: string; name: string; args: Record<string, unknown> }, result: { content: string; isError: boolean }): Promise<string | null> {
    if (!this.options.hooks.has('PostToolUse')) return null;
    const outcome = await this.options.hooks.run({
      point: 'PostToolUse',
      toolName: call.name,
      toolCallId: call.id,
      fields: { tool_input: call.args, tool_response: { content: result.content, is_error: result.isError } },
    });
    const notes = [...(outcome.blocked !== null ? [`A PostToolUse hook says: ${outcome.blocked}`] : []), ...outcome.additionalContext];
    return notes.length > 0 ? notes.join('\n') : null;
  }

  /** UserPromptSubmit for the newest user message: blocked (with the reason) or context to add. */
  async onPrompt(prompt: string): Promise<{ blocked: string | null; context: string[] }> {
    if (!this.options.hooks.has('UserPromptSubmit')) return { blocked: null, context: [] };
    const outcome = await this.options.hooks.run({ point: 'UserPromptSubmit', fields: { prompt } });
    return { blocked: outcome.blocked, context: outcome.additionalContext };
  }

  /** Stop (SubagentStop in a subagent): a reason to keep going, or null to let the run end. Bounded per run. */
  async onStop(lastMessage: string | null): Promise<string | null> {
    const point = this.options.subagent ? 'SubagentStop' : 'Stop';
    if (!this.options.hooks.has(point)) return null;
    const active = this.stopContinuations > 0;
    const outcome = await this.options.hooks.run({ point, fields: { stop_hook_active: active, last_assistant_message: lastMessage, ...this.options.subagent } });
    if (outcome.blocked === null || this.stopContinuations >= ToolGate.MAX_STOP_CONTINUATIONS) return null;
    this.stopContinuations += 1;
    return outcome.blocked;
  }

  /** PreCompact: the reason when a hook blocks the condensation, else null. */
  async onPreCompact(input: { trigger: 'manual' | 'auto'; instructions: string | null }): Promise<string | null> {
    if (!this.options.hooks.has('PreCompact')) return null;
    return (await this.options.hooks.run({ point: 'PreCompact', fields: { trigger: input.trigger, custom_instructions: input.instructions ?? '' } })).blocked;
  }

  /** SessionStart: context for the model at the first run of a conversation. */
  async onSessionStart(): Promise<string[]> {
    if (!this.options.hooks.has('SessionStart')) return [];
    return (await this.options.hooks.run({ point: 'SessionStart', fields: { source: 'startup' } })).additionalContext;
  }
}

/** Why a rule (or the default) refused a call, as the model and the rejection event say it. */
function denial(verdict: { rule?: string | null | undefined; source?: string | null | undefined; undecidable?: string | undefined }): { reason: string; rule?: string } {
  const where = verdict.source === 'project' ? " (from the project's .claude/settings.json)" : '';
  const unsure = verdict.undecidable ? `Denied: the command cannot be checked against the permission rules before it runs (${verdict.undecidable}), and the default for this conversation is deny.` : null;
  const reason = unsure ?? (verdict.rule ? `Denied by the permission rule \`${verdict.rule}\`${where}.` : 'Denied: the permission default for this conversation is deny.');
  return { reason, ...(verdict.rule && { rule: verdict.rule }) };
}
