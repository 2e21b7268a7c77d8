import path from 'node:path';
import type * as acp from '@agentclientprotocol/sdk';
import type { EventOf } from '../../client/index.js';

type Action = Pick<EventOf<'action'>, 'tool_call_id' | 'tool_name' | 'arguments'>;
export type ToolCallFields = Omit<acp.ToolCall, 'sessionUpdate'>;

const KINDS: Record<string, acp.ToolKind> = {
  bash: 'execute',
  glob: 'search',
  grep: 'search',
  web_fetch: 'fetch',
  web_search: 'fetch',
  task_tracker: 'think',
  task: 'think',
  skill: 'read',
  slash_command: 'read',
};

/** How an editor shows an `action`: its kind, a one-line title, the files it touches and, for an edit, the diff it makes. */
export function toolCallOf(action: Action, workdir: string): ToolCallFields {
  const args = action.arguments;
  const target = typeof args.path === 'string' ? absolute(workdir, args.path) : null;
  return {
    toolCallId: action.tool_call_id,
    title: titleOf(action),
    kind: kindOf(action),
    status: 'pending',
    rawInput: args,
    ...(target ? { locations: [{ path: target, ...lineOf(args) }] } : {}),
    ...(target && action.tool_name === 'file_editor' ? diffOf(args, target) : {}),
  };
}

function kindOf(action: Action): acp.ToolKind {
  if (action.tool_name === 'file_editor') return action.arguments.command === 'view' ? 'read' : 'edit';
  return KINDS[action.tool_name] ?? 'other';
}

function titleOf(action: Action): string {
  const args = action.arguments;
  const first = (...names: string[]) => names.map((name) => args[name]).find((value): value is string => typeof value === 'string');
  switch (action.tool_name) {
    case 'bash':
      return first('command') ?? 'bash';
    case 'file_editor':
      return `${first('command') ?? 'edit'} ${first('path') ?? ''}`.trim();
    case 'glob':
    case 'grep':
      return `${action.tool_name} ${first('pattern') ?? ''}${typeof args.path === 'string' ? ` in ${args.path}` : ''}`.trim();
    case 'web_fetch':
      return `fetch ${first('url') ?? ''}`.trim();
    case 'task':
      return first('description') ?? 'task';
    case 'ask_user':
      return first('question') ?? 'ask_user';
    default:
      return action.tool_name;
  }
}

function lineOf(args: Record<string, unknown>): { line?: number } {
  if (typeof args.insert_line === 'number') return { line: args.insert_line };
  if (Array.isArray(args.view_range) && typeof args.view_range[0] === 'number') return { line: args.view_range[0] };
  return {};
}

/** The diff an edit makes, as far as its arguments say: the replaced text, or the whole new file. */
function diffOf(args: Record<string, unknown>, target: string): { content?: acp.ToolCallContent[] } {
  const str = (name: string) => (typeof args[name] === 'string' ? (args[name] as string) : null);
  switch (args.command) {
    case 'create':
      return { content: [{ type: 'diff', path: target, oldText: null, newText: str('file_text') ?? '' }] };
    case 'str_replace':
      return { content: [{ type: 'diff', path: target, oldText: str('old_str') ?? '', newText: str('new_str') ?? '' }] };
    case 'insert':
      return { content: [{ type: 'diff', path: target, oldText: '', newText: str('new_str') ?? '' }] };
    default:
      return {};
  }
}

const PLAN_STATUS: Record<string, acp.PlanEntryStatus> = { todo: 'pending', in_progress: 'in_progress', done: 'completed' };

/** A task_tracker `plan` call as an ACP plan (the whole list, as the call replaces it); null for any other call. */
export function planOf(action: Action): acp.PlanEntry[] | null {
  if (action.tool_name !== 'task_tracker' || action.arguments.command !== 'plan' || !Array.isArray(action.arguments.tasks)) return null;
  return action.arguments.tasks.flatMap((task: unknown) => {
    if (typeof task !== 'object' || task === null) return [];
    const { title, status } = task as { title?: unknown; status?: unknown };
    if (typeof title !== 'string') return [];
    return [{ content: title, priority: 'medium' as const, status: PLAN_STATUS[String(status)] ?? 'pending' }];
  });
}

function absolute(workdir: string, value: string): string {
  return path.isAbsolute(value) ? value : path.join(workdir, value);
}
