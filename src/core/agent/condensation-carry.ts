import type { HistoryEntry } from './conversation-history.js';
import type { LlmMessage } from './llm.js';

/**
 * What a condensation carries over verbatim beside the LLM's summary: the user's own messages (their
 * requirements and constraints, which a summary of a summary tends to wear away) and the task list
 * as it stands. Each condensation reads the block of the summary it folds in and adds to it, so a
 * requirement stated in the first turn survives any number of condensations.
 */
const USER_HEADING = "### Carried over: the user's messages (verbatim, oldest first)";
const TASKS_HEADING = '### Carried over: the task list when the history was condensed';
const SEPARATOR = '\n\n---\n';
/** Each message is cut to this many characters, and the block keeps this many of them (the first one always). */
const MAX_MESSAGE_CHARS = 1_200;
const MAX_MESSAGES = 12;

/** Opens the message a condensation puts in the history (condensed-history.md). */
export const CONDENSED_PREFIX = '[The conversation went on for a while before this point.';

export function isCondensedSummary(message: LlmMessage): boolean {
  return message.role === 'user' && typeof message.content === 'string' && message.content.startsWith(CONDENSED_PREFIX);
}

/** The block to append to a summary: the user's messages among the forgotten ones (and those an earlier summary carried), the task list. */
export function carriedBlock(forgotten: readonly HistoryEntry[], taskList: string | null): string {
  const lines: string[] = [];
  for (const entry of forgotten) {
    const message = entry.message;
    if (message.role !== 'user') continue;
    if (isCondensedSummary(message)) {
      lines.push(...carriedUserLines(message.content as string));
      continue;
    }
    const text = typeof message.content === 'string' ? message.content : message.content.map((part) => (part.type === 'text' ? part.text : '[image]')).join(' ');
    lines.push(`- event #${entry.seq}: ${JSON.stringify(cut(text.trim()))}`);
  }
  const kept = lines.length > MAX_MESSAGES ? [lines[0]!, ...lines.slice(-(MAX_MESSAGES - 1))] : lines;
  const parts: string[] = [];
  if (kept.length > 0) parts.push(`${USER_HEADING}\n${kept.join('\n')}`);
  if (taskList) parts.push(`${TASKS_HEADING}\n${taskList.trim()}`);
  return parts.length > 0 ? `${SEPARATOR}${parts.join('\n\n')}` : '';
}

/** A summary message without its carried block (what the summariser is shown as the earlier summary). */
export function withoutCarried(text: string): string {
  const at = text.indexOf(`${SEPARATOR}${USER_HEADING}`);
  const tasksAt = text.indexOf(`${SEPARATOR}${TASKS_HEADING}`);
  const first = [at, tasksAt].filter((index) => index >= 0);
  return first.length > 0 ? text.slice(0, Math.min(...first)) : text;
}

function carriedUserLines(text: string): string[] {
  const start = text.indexOf(USER_HEADING);
  if (start < 0) return [];
  const lines: string[] = [];
  for (const line of text.slice(start + USER_HEADING.length + 1).split('\n')) {
    if (!line.startsWith('- event #')) break;
    lines.push(line);
  }
  return lines;
}

function cut(text: string): string {
  return text.length <= MAX_MESSAGE_CHARS ? text : `${text.slice(0, MAX_MESSAGE_CHARS)} […]`;
}
