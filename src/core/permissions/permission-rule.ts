import path from 'node:path';
import { compileGlob } from '../workspace/glob-match.js';

/**
 * One rule in the Claude Code syntax: `tool` (every call of the tool) or `tool(pattern)`.
 * The tool name may itself be a glob (`mcp__fs__*`); what the pattern is matched against
 * depends on the tool (see `subjectsOf`).
 */
export interface PermissionRule {
  text: string;
  tool: RegExp;
  pattern: string | null;
  /** The pattern compiled once per kind of subject (a rule is checked on every tool call). */
  testers: Partial<Record<'path' | 'text', (value: string) => boolean>>;
}

const RULE = /^([A-Za-z0-9_*.-]+)(?:\((.*)\))?$/s;

export function isValidRule(text: string): boolean {
  return RULE.test(text.trim());
}

export function parseRule(text: string): PermissionRule {
  const match = RULE.exec(text.trim());
  if (!match) throw new Error(`Invalid permission rule "${text}": write tool or tool(pattern).`);
  const pattern = match[2] === undefined || match[2] === '' || match[2] === '*' || match[2] === '**' ? null : match[2];
  return { text: text.trim(), tool: wildcard(match[1]!, false), pattern, testers: {} };
}

/** `*` matches any run of characters; everything else is literal. */
function wildcard(pattern: string, prefixColon: boolean): RegExp {
  // `npm run test:*` (Claude Code's prefix form) is `npm run test*`.
  const source = prefixColon && pattern.endsWith(':*') ? `${pattern.slice(0, -2)}*` : pattern;
  const body = source.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*');
  return new RegExp(`^${body}$`, 's');
}

/** Tools whose pattern is a path glob, and the argument that holds the path. */
const PATH_ARGUMENT: Record<string, string> = { file_editor: 'path', glob: 'path', grep: 'path' };

/**
 * What a rule's pattern is matched against for one call: for `bash`, the whole command and each
 * simple command in it (split at `;`, `&&`, `||`, `|`, newlines), so `rm -rf` hidden behind
 * `true &&` is still found; for file tools, the path relative to the workdir; for any other
 * tool, its arguments as JSON.
 */
export interface Subjects {
  kind: 'command' | 'path' | 'json';
  values: string[];
}

export function subjectsOf(toolName: string, args: Record<string, unknown>, workdir: string): Subjects {
  if (toolName === 'bash') {
    const command = typeof args.command === 'string' ? args.command.trim() : '';
    const parts = command.split(/\|\||&&|[;|\n&]/).map((part) => part.trim()).filter((part) => part.length > 0);
    return { kind: 'command', values: [command, ...parts.filter((part) => part !== command)] };
  }
  const key = PATH_ARGUMENT[toolName];
  if (key !== undefined) {
    const raw = typeof args[key] === 'string' && args[key] !== '' ? (args[key] as string) : '.';
    const absolute = path.resolve(workdir, raw);
    const relative = path.relative(workdir, absolute).split(path.sep).join('/');
    return { kind: 'path', values: [relative === '' ? '.' : relative] };
  }
  return { kind: 'json', values: [JSON.stringify(args)] };
}

/** Does the rule cover any of the subjects (for ask and deny)? */
export function ruleMatches(rule: PermissionRule, toolName: string, subjects: Subjects): boolean {
  if (!rule.tool.test(toolName)) return false;
  if (rule.pattern === null) return true;
  const kind = subjects.kind === 'path' ? 'path' : 'text';
  const test = (rule.testers[kind] ??= kind === 'path' ? pathTester(rule.pattern) : wildcardTester(rule.pattern));
  return subjects.values.some(test);
}

/**
 * Do the allow rules cover the whole call? For bash every simple command must be covered by some
 * allow rule; a substitution hides what runs, so no pattern can allow it (the default decides).
 */
export function allowedBy(rules: readonly PermissionRule[], toolName: string, subjects: Subjects): PermissionRule | null {
  if (subjects.kind !== 'command') return rules.find((rule) => ruleMatches(rule, toolName, subjects)) ?? null;
  const [whole = '', ...parts] = subjects.values;
  const unconditional = rules.find((rule) => rule.pattern === null && rule.tool.test(toolName));
  if (unconditional) return unconditional;
  if (/`|\$\(|<\(|>\(/.test(whole)) return null;
  let last: PermissionRule | null = null;
  for (const part of parts.length === 0 ? [whole] : parts) {
    last = rules.find((rule) => ruleMatches(rule, toolName, { kind: 'command', values: [part] })) ?? null;
    if (last === null) return null;
  }
  return last;
}

function wildcardTester(pattern: string): (value: string) => boolean {
  const exp = wildcard(pattern, true);
  return (value) => exp.test(value);
}

function pathTester(pattern: string): (value: string) => boolean {
  // A path pattern is relative to the workdir; `./src/**` and `/src/**` mean the same.
  const normalized = pattern.replace(/^\.?\//, '');
  const glob = compileGlob(normalized, { dot: true });
  // `src/**` also covers `src` itself (a listing of the directory).
  const base = normalized.endsWith('/**') ? normalized.slice(0, -3) : null;
  return (value) => glob(value) || (base !== null && value === base);
}
