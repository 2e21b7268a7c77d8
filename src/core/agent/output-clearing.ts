import type { ConversationHistory } from './conversation-history.js';

/** The last tool results are left as they are: the model is likely working from them. */
const KEEP_RECENT_RESULTS = 2;
/** A result shorter than this costs less than the pointer is worth. */
const MIN_CLEARED_CHARS = 400;
const CLEARED_PREFIX = '[Old tool output cleared to fit the context window';
/** Where the executor said it saved a cut output's full text (tool-executor.ts). */
const SAVED_AT = /(?:full output in|parts are in) (\.agentd\/outputs\/\S+?\.txt)/;

/**
 * The first rung of the overflow ladder: the results of older tool calls become a one-line
 * pointer to their full text under `.agentd/outputs/` (the copy the executor saved when it cut the
 * output, else one saved now). Only the history in memory changes: the log keeps every output, and
 * a restart folds them back (a later overflow clears them again). Returns how many were cleared.
 */
export async function clearOldOutputs(history: ConversationHistory, save?: (text: string, tool: string) => Promise<string | null>): Promise<number> {
  const entries = history.entries().slice(0, history.settledLength);
  const results = entries.filter((entry) => entry.role === 'tool');
  const recent = new Set(results.slice(-KEEP_RECENT_RESULTS));
  const toolNames = new Map<string, string>();
  let cleared = 0;
  for (const entry of entries) {
    const message = entry.message;
    if (message.role === 'assistant') for (const call of message.tool_calls ?? []) toolNames.set(call.id, call.name);
    if (message.role !== 'tool' || recent.has(entry) || message.content.length < MIN_CLEARED_CHARS || message.content.startsWith(CLEARED_PREFIX)) continue;
    const tool = toolNames.get(message.tool_call_id) ?? 'tool';
    const path = SAVED_AT.exec(message.content)?.[1] ?? (await save?.(message.content, tool).catch(() => null)) ?? null;
    const lines = message.content.split('\n').length;
    const where = path ? `the full text is in ${path}` : 'run the call again if you need it';
    entry.replace({ role: 'tool', tool_call_id: message.tool_call_id, content: `${CLEARED_PREFIX} (${lines} lines of \`${tool}\` output, event #${entry.seq}); ${where}.]` });
    cleared += 1;
  }
  return cleared;
}
