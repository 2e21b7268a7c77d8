import { allowedBy, parseRule, ruleMatches, subjectsOf, type PermissionRule, type SubjectReaders } from './permission-rule.js';

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
  /** Why the call could not be checked against the rules (`eval` of a variable…): it is asked, or refused under `default: deny`. */
  undecidable?: string;
}

const STRICTNESS: Record<PermissionDecision, number> = { allow: 0, ask: 1, deny: 2 };

/**
 * The one permission check every tool call passes. Precedence deny > ask > allow > default;
 * project rules (`.claude/settings.json`) only add ask and deny, never allow.
 * `confirmation_mode: true` makes the default at least `ask`. A bash line that cannot be decided
 * statically (bash-commands.ts), or whose dynamic words might make a deny or ask rule match, is
 * asked (refused under `default: deny`) whenever a deny or ask rule concerns bash.
 */
export class PermissionPolicy {
  private readonly deny: { rule: PermissionRule; source: 'conversation' | 'project' }[] = [];
  private readonly ask: { rule: PermissionRule; source: 'conversation' | 'project' }[] = [];
  private readonly allow: PermissionRule[] = [];
  private readonly fallback: PermissionDecision;

  private readonly readers: SubjectReaders;

  constructor(options: { conversation?: PermissionsConfig | undefined; project?: PermissionsConfig | null | undefined; confirmationMode: boolean; readers: SubjectReaders }) {
    this.readers = options.readers;
    const own = options.conversation ?? {};
    for (const text of own.deny ?? []) this.deny.push({ rule: parseRule(text), source: 'conversation' });
    for (const text of own.ask ?? []) this.ask.push({ rule: parseRule(text), source: 'conversation' });
    for (const text of own.allow ?? []) this.allow.push(parseRule(text));
    for (const text of options.project?.deny ?? []) tryPush(this.deny, text, 'project');
    for (const text of options.project?.ask ?? []) tryPush(this.ask, text, 'project');
    const configured = own.default ?? 'allow';
    this.fallback = options.confirmationMode && STRICTNESS[configured] < STRICTNESS.ask ? 'ask' : configured;
  }

  async check(toolName: string, args: Record<string, unknown>, workdir: string): Promise<PermissionVerdict> {
    // No rule: the default decides, with nothing to match (a call's arguments are not even looked at).
    if (this.deny.length === 0 && this.ask.length === 0 && this.allow.length === 0) return this.byDefault(toolName);
    const subjects = await subjectsOf(this.readers, toolName, args, workdir);
    let uncertain: { rule: PermissionRule; source: 'conversation' | 'project'; list: 'deny' | 'ask' } | null = null;
    for (const { rule, source } of this.deny) {
      const match = ruleMatches(rule, toolName, subjects);
      if (match === 'yes') return { decision: 'deny', rule: `deny: ${rule.text}`, source };
      if (match === 'maybe') uncertain ??= { rule, source, list: 'deny' };
    }
    if (subjects.kind === 'command' && subjects.analysis.undecidable.length > 0 && this.guards(toolName)) {
      return { decision: this.unsure(), rule: null, source: 'default', undecidable: subjects.analysis.undecidable[0]! };
    }
    if (uncertain) return { decision: this.unsure(), rule: `deny: ${uncertain.rule.text}`, source: uncertain.source, undecidable: 'a word of the command is known only when it runs' };
    for (const { rule, source } of this.ask) if (ruleMatches(rule, toolName, subjects) !== 'no') return { decision: 'ask', rule: `ask: ${rule.text}`, source };
    const allowed = allowedBy(this.allow, toolName, subjects);
    if (allowed) return { decision: 'allow', rule: `allow: ${allowed.text}`, source: 'conversation' };
    return this.byDefault(toolName);
  }

  /** Does a deny or ask rule concern this tool (so that what cannot be checked must not simply run)? */
  private guards(toolName: string): boolean {
    return this.deny.some(({ rule }) => rule.tool.test(toolName)) || this.ask.some(({ rule }) => rule.tool.test(toolName));
  }

  /** What a call the rules cannot decide gets: a question, or a refusal under `default: deny`. */
  private unsure(): PermissionDecision {
    return this.fallback === 'deny' ? 'deny' : 'ask';
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
