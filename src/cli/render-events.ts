import pc from 'picocolors';
import type { AgentEvent, PendingAction, StreamEvent } from '../client/index.js';

const MAX_LINE = 160;

function clip(text: string, max = MAX_LINE): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** `bash(ls -la)`, `file_editor(create notes.md)`: a tool call in one short line. */
export function describeCall(toolName: string, args: Record<string, unknown>): string {
  const pick = (...names: string[]) => names.map((name) => args[name]).filter((value) => typeof value === 'string' || typeof value === 'number').join(' ');
  const summary =
    toolName === 'bash' ? pick('command')
    : toolName === 'file_editor' ? pick('command', 'path')
    : toolName === 'glob' || toolName === 'grep' ? pick('pattern', 'path')
    : toolName === 'task_tracker' ? pick('command')
    : toolName === 'finish' ? pick('message')
    : JSON.stringify(args);
  return `${toolName}(${clip(summary, 100)})`;
}

/** The first line of a tool's output and how many more there are. */
function describeOutput(content: string): string {
  const lines = content.replace(/\n+$/, '').split('\n');
  const first = clip(lines[0] ?? '', 120) || '(no output)';
  return lines.length > 1 ? `${first} ${pc.dim(`(+${lines.length - 1} lines)`)}` : first;
}

export function describePending(pending: PendingAction[]): string {
  return pending.map((action) => `  ${pc.yellow('?')} ${describeCall(action.tool_name, action.arguments)}`).join('\n');
}

/**
 * The progress line of an event (tool calls, their results, usage, status changes, errors), or
 * null for events shown otherwise (messages, deltas) or not at all.
 */
export function progressLine(event: StreamEvent): string | null {
  switch (event.kind) {
    case 'action':
      return event.tool_name === 'finish' ? null : `${pc.cyan('●')} ${describeCall(event.tool_name, event.arguments)}`;
    case 'observation':
      return event.tool_name === 'finish' ? null : `  ${event.is_error ? pc.red('✗') : pc.green('⎿')} ${describeOutput(event.content)}`;
    case 'rejection':
      return `  ${pc.red('✗')} rejected ${event.tool_name}: ${clip(event.reason)}`;
    case 'usage':
      if (event.prompt_tokens === null) return pc.dim('  tokens: unknown (the provider reported no usage)');
      return pc.dim(`  tokens: ${event.prompt_tokens} in, ${event.completion_tokens} out${event.cost ? `, $${event.cost.toFixed(4)}` : ''}`);
    case 'reasoning':
      return event.content ? pc.dim(`  ∴ ${clip(event.content, 300)}`) : null;
    case 'agent_error':
      return `${pc.red('error')} ${event.error}: ${clip(event.message, 300)}`;
    case 'state_update':
      if (event.status === 'running' || event.status === 'idle' || event.status === 'finished') return null;
      // The question line above says it already; its reason is written for API clients.
      if (event.status === 'waiting_for_input') return null;
      return pc.dim(`[${event.status}${event.reason ? `: ${clip(event.reason)}` : ''}]`);
    case 'condensation':
      return pc.dim(`[events #${event.forgotten_from_seq}–#${event.forgotten_to_seq} condensed into a summary: ~${event.tokens_before} → ~${event.tokens_after} tokens]`);
    case 'interrupt':
      return pc.dim(`[interrupted by message #${event.message_seq}${event.stopped === 'tool' ? ': the running tool call was stopped' : event.stopped === 'llm' ? ': the answer being written was dropped' : ''}]`);
    case 'rollback':
      return pc.dim(`[run rolled back: events #${event.forgotten_from_seq}–#${event.forgotten_to_seq} no longer reach the model]`);
    case 'mcp_refused':
      return `  ${pc.red('✗')} MCP server ${event.server} refused: ${clip(event.reason, 300)}`;
    case 'schedule_fire':
      return pc.dim(`[schedule ${event.schedule_id} fired for ${event.scheduled_for}]`);
    case 'question':
      return `${pc.yellow('?')} ${event.question}${event.options?.length ? pc.dim(` (${event.options.join(' / ')})`) : ''}`;
    default:
      return null;
  }
}

/** A whole event as one or more lines, for `agentd events` and for replaying a conversation. */
export function transcriptLines(event: AgentEvent): string | null {
  if (event.kind === 'message') {
    if (event.source === 'user') return `${pc.bold(pc.green('>'))} ${event.content}`;
    if (event.source === 'agent') return event.content;
    return pc.dim(`(note to the model) ${clip(event.content)}`);
  }
  if (event.kind === 'action' && event.tool_name === 'finish') return typeof event.arguments.message === 'string' ? event.arguments.message : null;
  if (event.kind === 'system_prompt') return null;
  return progressLine(event);
}
