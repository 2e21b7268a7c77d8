import { z } from 'zod';
import { isValidRule } from '../permissions/permission-rule.js';

/** Fields that put tools under the user's control: permission rules, hooks, where settings come from. */

const Rule = z
  .string()
  .min(1)
  .max(4096)
  .refine(isValidRule, 'a rule is `tool` or `tool(pattern)`, e.g. `bash(git push*)`, `file_editor(src/**)`, `mcp__fs__*`');
const Rules = z.array(Rule).max(500);

export const PermissionDecision = z.enum(['allow', 'ask', 'deny']).meta({ id: 'PermissionDecision' });

export const Permissions = z
  .object({
    default: PermissionDecision.optional().describe('What a call no rule matches gets (default `allow`; `ask` when confirmation_mode is true).'),
    allow: Rules.optional(),
    ask: Rules.optional(),
    deny: Rules.optional(),
  })
  .strict()
  .describe(
    'Permission rules checked before every tool call (built-in and MCP). A rule is `tool` or `tool(pattern)`: `bash(git push*)` matches the command (`*` is any text; every simple command of a compound one must match an allow rule, any may match ask/deny), `file_editor(src/**)` matches the path relative to the workdir, `mcp__fs__*` matches tool names. Precedence deny > ask > allow > default. `ask` puts the call in pending_actions; `deny` records a `rejection` naming the rule.',
  )
  .meta({ id: 'Permissions' });
export type Permissions = z.infer<typeof Permissions>;

export const HOOK_POINTS = ['PreToolUse', 'PostToolUse', 'UserPromptSubmit', 'Stop', 'SubagentStop', 'PreCompact', 'SessionStart'] as const;
export const HookPoint = z.enum(HOOK_POINTS).meta({ id: 'HookPoint' });
export type HookPoint = z.infer<typeof HookPoint>;

const TimeoutS = z.number().positive().max(600).optional().describe('Default 60.');
const OnError = z
  .enum(['block', 'continue'])
  .optional()
  .describe('What a timeout, a crash, another exit code than 0 or 2, or an unreachable receiver means: `block`, or `continue` (recorded as a `hook` event with decision `error`). Default: `block` for http hooks at PreToolUse and PreCompact, else `continue`.');

export const CommandHook = z
  .object({ type: z.literal('command'), command: z.string().min(1).max(100_000), timeout_s: TimeoutS, on_error: OnError })
  .strict()
  .describe('Runs `bash -c <command>` inside the conversation\'s sandbox, in its workdir, with the event JSON on stdin. Exit 0: continue (stdout may be decision JSON); exit 2: block, stderr is the reason; any other code: an error.')
  .meta({ id: 'CommandHook' });

export const HttpHook = z
  .object({
    type: z.literal('http'),
    url: z.url({ protocol: /^https?$/ }).max(4096),
    secret: z.string().min(1).max(4096).optional().describe('Signs the POST like webhooks (Standard Webhooks headers). Never returned.'),
    timeout_s: TimeoutS,
    on_error: OnError,
  })
  .strict()
  .describe('POSTs the event JSON; the response body may be decision JSON. A non-2xx status is an error.')
  .meta({ id: 'HttpHook' });

export const HookHandler = z.discriminatedUnion('type', [CommandHook, HttpHook]).meta({ id: 'HookHandler' });
export type HookHandler = z.infer<typeof HookHandler>;

export const HookMatcher = z
  .object({
    matcher: z.string().max(1000).optional().describe('Tool name glob (`bash`, `file_*`, `mcp__fs__*`) or `a|b`; empty or absent matches every tool. For tool hook points only.'),
    hooks: z.array(HookHandler).min(1).max(20),
  })
  .strict()
  .meta({ id: 'HookMatcher' });
export type HookMatcher = z.infer<typeof HookMatcher>;

export const Hooks = z
  .partialRecord(HookPoint, z.array(HookMatcher).max(50))
  .describe('Lifecycle hooks in the Claude Code shape. Every hook run is a `hook` event.')
  .meta({ id: 'Hooks' });
export type Hooks = z.infer<typeof Hooks>;

export const SettingSources = z
  .array(z.enum(['project']))
  .max(1)
  .describe("`[\"project\"]` (default) reads the workdir's `CLAUDE.md`/`AGENTS.md`, `.claude/skills`, `.agents/skills`, `.claude/commands`, `.claude/agents`, `.mcp.json` and `.claude/settings.json` (its ask/deny permission rules only tighten); `[]` reads none.")
  .meta({ id: 'SettingSources' });
export type SettingSources = z.infer<typeof SettingSources>;

/** Hooks as returned: an http hook's secret is never shown. */
export function publicHooks(hooks: Hooks | undefined): Hooks {
  const out: Hooks = {};
  for (const [point, matchers] of Object.entries(hooks ?? {}) as [HookPoint, HookMatcher[]][]) {
    out[point] = matchers.map((matcher) => ({
      ...matcher,
      hooks: matcher.hooks.map((hook) => (hook.type === 'http' && hook.secret !== undefined ? { ...hook, secret: '********' } : hook)),
    }));
  }
  return out;
}
