import type { NewEvent } from '../schemas/event.js';
import type { HookHandler, HookMatcher, HookPoint, Hooks } from '../schemas/tool-control.js';
import { readHookOutput, type HookReply } from './hook-output.js';
import type { HookTransport } from './hook-transport.js';

const DEFAULT_TIMEOUT_S = 60;
/** Points whose hooks gate something: an http hook that fails there blocks unless told otherwise. */
const GATING_POINTS: ReadonlySet<HookPoint> = new Set(['PreToolUse', 'PreCompact']);
/** Points where a hook's plain stdout is context for the model (as in Claude Code). */
const CONTEXT_POINTS: ReadonlySet<HookPoint> = new Set(['UserPromptSubmit', 'SessionStart']);

/** What the hooks of one point decided together. */
export interface HookOutcome {
  /** Set when any hook blocked: the reason the model (or the run) is given. */
  blocked: string | null;
  /** A hook asked for the user's confirmation (PreToolUse). */
  ask: boolean;
  /** The last rewrite of the tool input, if any hook rewrote it. */
  updatedInput: Record<string, unknown> | null;
  additionalContext: string[];
}

export interface HookCall {
  point: HookPoint;
  /** The tool the point is about (PreToolUse, PostToolUse): what matchers are tested against. */
  toolName?: string;
  toolCallId?: string;
  /** Point-specific fields of the JSON the hook receives (`tool_input`, `prompt`, …). */
  fields: Record<string, unknown>;
}

/**
 * Runs the hooks configured for a point: the matching ones concurrently, each bounded by its
 * timeout, each recorded as a `hook` event. Exit 0 continues (stdout may be decision JSON), exit 2
 * blocks with stderr as the reason, any other code is an error: logged, and the run continues
 * unless the hook says `on_error: "block"` (http hooks at PreToolUse/PreCompact block by default).
 */
export class HookRunner {
  constructor(
    private readonly options: {
      hooks: Hooks;
      transport: HookTransport;
      base: { conversation_id: string; run_id: string | null; cwd: string };
      signal: AbortSignal;
      append: (event: NewEvent) => void;
    },
  ) {}

  has(point: HookPoint): boolean {
    return (this.options.hooks[point]?.length ?? 0) > 0;
  }

  async run(call: HookCall): Promise<HookOutcome> {
    const outcome: HookOutcome = { blocked: null, ask: false, updatedInput: null, additionalContext: [] };
    const matched = (this.options.hooks[call.point] ?? []).filter((entry) => matches(entry, call.toolName));
    if (matched.length === 0) return outcome;
    const input = JSON.stringify({
      session_id: this.options.base.conversation_id,
      ...this.options.base,
      hook_event_name: call.point,
      ...(call.toolName !== undefined && { tool_name: call.toolName }),
      ...(call.toolCallId !== undefined && { tool_use_id: call.toolCallId }),
      ...call.fields,
    });
    const runs = matched.flatMap((entry) => entry.hooks.map((hook) => ({ entry, hook })));
    const replies = await Promise.all(runs.map(({ entry, hook }) => this.runOne(call, entry, hook, input)));
    for (const reply of replies) {
      if (reply.decision === 'block' && outcome.blocked === null) outcome.blocked = reply.reason ?? `Blocked by a ${call.point} hook.`;
      if (reply.decision === 'ask') outcome.ask = true;
      if (reply.updatedInput) outcome.updatedInput = reply.updatedInput;
      if (reply.additionalContext) outcome.additionalContext.push(reply.additionalContext);
    }
    return outcome;
  }

  private async runOne(call: HookCall, entry: HookMatcher, hook: HookHandler, input: string): Promise<HookReply> {
    const started = performance.now();
    const timeoutMs = Math.round((hook.timeout_s ?? DEFAULT_TIMEOUT_S) * 1000);
    const onError = hook.on_error ?? (hook.type === 'http' && GATING_POINTS.has(call.point) ? 'block' : 'continue');
    const plainTextIsContext = CONTEXT_POINTS.has(call.point);
    let reply: HookReply;
    let failure: string | null = null;
    try {
      if (hook.type === 'command') {
        const result = await this.options.transport.command({ command: hook.command, stdin: input, timeoutMs, signal: this.options.signal });
        if (result.timedOut) failure = `the hook timed out after ${timeoutMs / 1000} s`;
        else if (result.exitCode === 2) reply = { decision: 'block', reason: result.stderr.trim() || `Blocked by a ${call.point} hook (exit code 2).`, updatedInput: null, additionalContext: null };
        else if (result.exitCode === 0) reply = readHookOutput(result.stdout, { plainTextIsContext });
        else failure = `the hook exited with code ${result.exitCode ?? 'none'}${result.stderr.trim() ? `: ${result.stderr.trim().slice(0, 2000)}` : ''}`;
      } else {
        const result = await this.options.transport.http({ url: hook.url, body: input, secret: hook.secret ?? null, timeoutMs, signal: this.options.signal });
        if (result.error !== null) failure = `the hook receiver failed: ${result.error}`;
        else if (result.status === null || result.status < 200 || result.status > 299) failure = `the hook receiver answered ${result.status}`;
        else reply = readHookOutput(result.body, { plainTextIsContext: false });
      }
    } catch (error) {
      failure = `the hook could not run: ${(error as Error).message}`;
    }
    if (failure !== null) {
      reply = onError === 'block'
        ? { decision: 'block', reason: `the hook failed (${failure})`, updatedInput: null, additionalContext: null }
        : { decision: 'error', reason: failure, updatedInput: null, additionalContext: null };
    }
    const final = reply!;
    // `ask` is a PreToolUse-only answer; elsewhere it means nothing.
    if (final.decision === 'ask' && call.point !== 'PreToolUse') final.decision = 'allow';
    this.options.append({
      kind: 'hook',
      source: 'system',
      hook_point: call.point,
      matcher: entry.matcher ?? null,
      hook: hook.type === 'command' ? hook.command : hook.url,
      duration_ms: Math.round(performance.now() - started),
      decision: final.decision === 'ask' ? 'allow' : failure !== null && final.decision === 'block' ? 'block' : final.decision,
      reason: final.decision === 'ask' ? 'asked for confirmation' : final.reason,
      tool_call_id: call.toolCallId ?? null,
      tool_name: call.toolName ?? null,
      run_id: this.options.base.run_id,
    });
    return final;
  }
}

/** A matcher is a tool name glob (`*` any text) or several joined with `|`; absent or empty matches all. */
export function matches(entry: HookMatcher, toolName: string | undefined): boolean {
  const matcher = entry.matcher?.trim();
  if (!matcher || matcher === '*' || toolName === undefined) return true;
  return matcher.split('|').some((alternative) => {
    const glob = alternative.trim().replace(/\.\*/g, '*');
    const source = glob.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*');
    return new RegExp(`^${source}$`).test(toolName);
  });
}
