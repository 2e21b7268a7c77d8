import { allowedBy, parseRule, ruleMatches, subjectsOf, type PermissionRule } from './permission-rule.js';

export type PermissionDecision = 'allow' | 'ask' | 'deny';

/** The `permissions` field of a conversation (and of a project's `.claude/settings.json`). */
export interface PermissionsConfig {
  default?: PermissionDecision | undefined;
  allow?: string[] | undefined;
  ask?: string[] | undefined;
  deny?: string[] | undefined;
}

export interface PermissionVerdict {
  decision: PermissionDecision;
  /** The rule that decided, as written (`deny: bash(rm -rf*)`), or null when the default did. */
  rule: string | null;
  /** Where the rule came from. */
  source: 'conversation' | 'project' | 'default';
}

const STRICTNESS: Record<PermissionDecision, number> = { allow: 0, ask: 1, deny: 2 };

/**
 * The one permission check every tool call passes. Precedence deny > ask > allow > default;
 * project rules (`.claude/settings.json`) only add ask and deny, never allow.
 * `confirmation_mode: true` makes the default at least `ask`.
 */
export class PermissionPolicy {
  private readonly deny: { rule: PermissionRule; source: 'conversation' | 'project' }[] = [];
  private readonly ask: { rule: PermissionRule; source: 'conversation' | 'project' }[] = [];
  private readonly allow: PermissionRule[] = [];
  private readonly fallback: PermissionDecision;

  constructor(options: { conversation?: PermissionsConfig | undefined; project?: PermissionsConfig | null | undefined; confirmationMode: boolean }) {
    const own = options.conversation ?? {};
    for (const text of own.deny ?? []) this.deny.push({ rule: parseRule(text), source: 'conversation' });
    for (const text of own.ask ?? []) this.ask.push({ rule: parseRule(text), source: 'conversation' });
    for (const text of own.allow ?? []) this.allow.push(parseRule(text));
    for (const text of options.project?.deny ?? []) tryPush(this.deny, text, 'project');
    for (const text of options.project?.ask ?? []) tryPush(this.ask, text, 'project');
    const configured = own.default ?? 'allow';
    this.fallback = options.confirmationMode && STRICTNESS[configured] < STRICTNESS.ask ? 'ask' : configured;
  }

  check(toolName: string, args: Record<string, unknown>, workdir: string): PermissionVerdict {
    // No rule: the default decides, with nothing to match (a call's arguments are not even looked at).
    if (this.deny.length === 0 && this.ask.length === 0 && this.allow.length === 0) return this.byDefault(toolName);
    const subjects = subjectsOf(toolName, args, workdir);
    for (const { rule, source } of this.deny) if (ruleMatches(rule, toolName, subjects)) return { decision: 'deny', rule: `deny: ${rule.text}`, source };
    for (const { rule, source } of this.ask) if (ruleMatches(rule, toolName, subjects)) return { decision: 'ask', rule: `ask: ${rule.text}`, source };
    const allowed = allowedBy(this.allow, toolName, subjects);
    if (allowed) return { decision: 'allow', rule: `allow: ${allowed.text}`, source: 'conversation' };
    return this.byDefault(toolName);
  }

  private byDefault(toolName: string): PermissionVerdict {
    // Approving a question before it is asked would be asking twice: only an explicit rule stops ask_user.
    if (this.fallback === 'ask' && toolName === 'ask_user') return { decision: 'allow', rule: null, source: 'default' };
    return { decision: this.fallback, rule: null, source: 'default' };
  }
}

/** A project file's rule that does not parse is skipped (it can only have tightened). */
function tryPush(list: { rule: PermissionRule; source: 'conversation' | 'project' }[], text: unknown, source: 'project'): void {
  if (typeof text !== 'string') return;
  try {
    list.push({ rule: parseRule(text), source });
  } catch {
    // ignored
  }
}
