/** What one hook said, read from its exit code and its output (Claude Code's hook output contract). */
export interface HookReply {
  decision: 'allow' | 'block' | 'ask' | 'rewrite' | 'error';
  reason: string | null;
  updatedInput: Record<string, unknown> | null;
  additionalContext: string | null;
}

const MAX_REASON_CHARS = 10_000;

/**
 * Reads the JSON a hook printed (or returned): `decision` (`block` | `approve`), `reason`,
 * `updatedInput`, `additionalContext`, also inside `hookSpecificOutput` with
 * `permissionDecision` (`deny` | `ask` | `allow`) and `permissionDecisionReason`; `continue: false`
 * with `stopReason` blocks. Plain text is context for the points that take it.
 */
export function readHookOutput(text: string, options: { plainTextIsContext: boolean }): HookReply {
  const trimmed = text.trim();
  const reply: HookReply = { decision: 'allow', reason: null, updatedInput: null, additionalContext: null };
  if (trimmed === '') return reply;
  let parsed: unknown;
  try {
    parsed = JSON.parse(trimmed);
  } catch {
    if (options.plainTextIsContext) reply.additionalContext = cap(trimmed);
    return reply;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return reply;
  const top = parsed as Record<string, unknown>;
  const specific = typeof top.hookSpecificOutput === 'object' && top.hookSpecificOutput !== null ? (top.hookSpecificOutput as Record<string, unknown>) : {};
  const reason = text_(specific.permissionDecisionReason) ?? text_(top.reason) ?? text_(top.stopReason);
  reply.reason = reason === null ? null : cap(reason);
  const context = text_(specific.additionalContext) ?? text_(top.additionalContext);
  if (context !== null) reply.additionalContext = cap(context);
  const updated = specific.updatedInput ?? top.updatedInput;
  if (typeof updated === 'object' && updated !== null && !Array.isArray(updated)) {
    reply.updatedInput = updated as Record<string, unknown>;
    reply.decision = 'rewrite';
  }
  const permission = specific.permissionDecision;
  if (top.decision === 'block' || permission === 'deny' || top.continue === false) reply.decision = 'block';
  else if (permission === 'ask') reply.decision = 'ask';
  return reply;
}

function text_(value: unknown): string | null {
  return typeof value === 'string' && value.trim() !== '' ? value : null;
}

function cap(text: string): string {
  return text.length <= MAX_REASON_CHARS ? text : `${text.slice(0, MAX_REASON_CHARS)} [... truncated]`;
}
