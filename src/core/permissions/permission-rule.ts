import path from 'node:path';
import { compileGlob } from '../workspace/glob-match.js';
import { analyzeBash, type BashAnalysis } from './bash-commands.js';
import { parseCommandPattern, commandMatches, commandMightMatch, type CommandPattern } from './command-pattern.js';
import type { ShellParser } from './shell-syntax.js';

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
  /** For bash: the pattern read as a command, once. */
  command?: CommandPattern;
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
 * What a rule's pattern is matched against for one call: for `bash`, every simple command the
 * line can run (bash-commands.ts) and the line itself; for file tools, the path relative to the
 * workdir as written and as it resolves there (through symlinks); for any other tool, its
 * arguments as JSON.
 */
export type Subjects = { kind: 'command'; line: string; analysis: BashAnalysis } | { kind: 'path'; values: string[] } | { kind: 'json'; values: string[] };

/** What a rule check needs from outside core: the bash parser and the workdir's path resolution. */
export interface SubjectReaders {
  shellParser: ShellParser;
  /** The real path `userPath` resolves to inside `workdir` (missing trailing parts allowed), or null when it leads outside or cannot be resolved. */
  resolvePath(workdir: string, userPath: string): Promise<string | null>;
}

export async function subjectsOf(readers: SubjectReaders, toolName: string, args: Record<string, unknown>, workdir: string): Promise<Subjects> {
  if (toolName === 'bash') {
    const line = typeof args.command === 'string' ? args.command.trim() : '';
    return { kind: 'command', line, analysis: await analyzeBash(readers.shellParser, line) };
  }
  const key = PATH_ARGUMENT[toolName];
  if (key !== undefined) {
    const raw = typeof args[key] === 'string' && args[key] !== '' ? (args[key] as string) : '.';
    const written = relativeTo(workdir, path.resolve(workdir, raw));
    // A link inside the workdir (`src/wf` → `../.github/workflows`) is judged by where it leads, as well as by its name.
    const real = await readers.resolvePath(workdir, raw).catch(() => null);
    const realWorkdir = real === null ? null : await readers.resolvePath(workdir, '.').catch(() => null);
    const resolved = real !== null && realWorkdir !== null ? relativeTo(realWorkdir, real) : null;
    return { kind: 'path', values: resolved !== null && resolved !== written && !resolved.startsWith('../') ? [written, resolved] : [written] };
  }
  return { kind: 'json', values: [JSON.stringify(args)] };
}

function relativeTo(root: string, absolute: string): string {
  const relative = path.relative(root, absolute).split(path.sep).join('/');
  return relative === '' ? '.' : relative;
}

/**
 * Does the rule cover the call (for ask and deny)? `maybe` when a bash command it names has a
 * word whose value is known only when it runs (`rm $flags dir`).
 */
export function ruleMatches(rule: PermissionRule, toolName: string, subjects: Subjects): 'yes' | 'maybe' | 'no' {
  if (!rule.tool.test(toolName)) return 'no';
  if (rule.pattern === null) return 'yes';
  if (subjects.kind === 'command') {
    const pattern = (rule.command ??= parseCommandPattern(rule.pattern));
    if ((rule.testers.text ??= wildcardTester(rule.pattern))(subjects.line)) return 'yes';
    if (subjects.analysis.commands.some((command) => commandMatches(pattern, command, 'covers'))) return 'yes';
    return subjects.analysis.commands.some((command) => commandMightMatch(pattern, command)) ? 'maybe' : 'no';
  }
  const kind = subjects.kind === 'path' ? 'path' : 'text';
  const test = (rule.testers[kind] ??= kind === 'path' ? pathTester(rule.pattern) : wildcardTester(rule.pattern));
  return subjects.values.some(test) ? 'yes' : 'no';
}

/**
 * Do the allow rules cover the whole call? For bash every simple command (and bare assignment)
 * must be covered by some allow rule, and nothing in the line may be undecidable; for a path, it
 * must be covered both as written and as resolved.
 */
export function allowedBy(rules: readonly PermissionRule[], toolName: string, subjects: Subjects): PermissionRule | null {
  const unconditional = rules.find((rule) => rule.pattern === null && rule.tool.test(toolName));
  if (unconditional) return unconditional;
  if (subjects.kind === 'json') return rules.find((rule) => ruleMatches(rule, toolName, subjects) === 'yes') ?? null;
  if (subjects.kind === 'path') {
    let last: PermissionRule | null = null;
    for (const value of subjects.values) {
      last = rules.find((rule) => ruleMatches(rule, toolName, { kind: 'path', values: [value] }) === 'yes') ?? null;
      if (last === null) return null;
    }
    return last;
  }
  const { analysis } = subjects;
  if (analysis.undecidable.length > 0) return null;
  const candidates = rules.filter((rule) => rule.tool.test(toolName) && rule.pattern !== null);
  let last: PermissionRule | null = null;
  for (const command of analysis.commands) {
    last = candidates.find((rule) => commandMatches((rule.command ??= parseCommandPattern(rule.pattern!)), command, 'allows')) ?? null;
    if (last === null) return null;
  }
  for (const assignment of analysis.assignments) {
    last = candidates.find((rule) => (rule.testers.text ??= wildcardTester(rule.pattern!))(assignment)) ?? null;
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
