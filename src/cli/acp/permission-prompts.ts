import type * as acp from '@agentclientprotocol/sdk';
import type { AgentContext } from '@agentclientprotocol/sdk';
import type { AgentdClient, PendingAction } from '../../client/index.js';
import { withRule } from './session-modes.js';
import { toolCallOf } from './tool-calls.js';

const OPTIONS: acp.PermissionOption[] = [
  { optionId: 'allow_once', name: 'Allow', kind: 'allow_once' },
  { optionId: 'allow_always', name: 'Always allow', kind: 'allow_always' },
  { optionId: 'reject_once', name: 'Reject', kind: 'reject_once' },
  { optionId: 'reject_always', name: 'Always reject', kind: 'reject_always' },
];

type Answer = 'allow_once' | 'allow_always' | 'reject_once' | 'reject_always';

/**
 * Asks the editor about each action awaiting approval (`session/request_permission`), then
 * decides them all in agentd: approved when every one was allowed, else rejected. An "always"
 * answer first adds a rule to the conversation's permissions, so the same call does not ask
 * again. An unanswered (cancelled) request leaves the actions pending in agentd, to be asked
 * again. Resolves to the run the decision started, or null.
 */
export async function askPermissions(options: { client: AgentdClient; editor: AgentContext; sessionId: string; asking: Set<string> }): Promise<string | null> {
  const { client, editor, sessionId, asking } = options;
  const conversation = await client.conversations.get(sessionId);
  if (conversation.status !== 'waiting_for_confirmation') return null;
  const pending = conversation.pending_actions.filter((action) => !asking.has(action.tool_call_id));
  if (pending.length === 0) return null;
  for (const action of pending) asking.add(action.tool_call_id);
  try {
    const answers: Answer[] = [];
    for (const action of pending) {
      const { toolCallId, title, kind, rawInput, locations, content } = toolCallOf({ ...action }, conversation.workdir);
      const response = await editor.request('session/request_permission', {
        sessionId,
        toolCall: { toolCallId, title, kind: kind ?? null, status: 'pending', rawInput, locations: locations ?? null, content: content ?? null },
        options: OPTIONS,
      });
      if (response.outcome.outcome !== 'selected') return null;
      answers.push(response.outcome.optionId as Answer);
    }
    let permissions = conversation.permissions;
    pending.forEach((action, index) => {
      const answer = answers[index];
      const list = answer === 'allow_always' ? 'allow' : answer === 'reject_always' ? 'deny' : null;
      if (list) for (const rule of rulesFor(action)) permissions = withRule(permissions, list, rule);
    });
    if (permissions !== conversation.permissions) await client.conversations.updateConfig(sessionId, { permissions });
    const rejected = answers.some((answer) => answer.startsWith('reject'));
    const started = rejected ? await client.runs.reject(sessionId, { reason: 'The user rejected this action in the editor.' }) : await client.runs.approve(sessionId);
    return started.run_id;
  } finally {
    for (const action of pending) asking.delete(action.tool_call_id);
  }
}

/**
 * The rules an "always" answer adds: for bash, one per command of the line (agentd asks each
 * simple command of a line to match an allow rule), without its redirections; a file's path for
 * file_editor; else the tool. A line with substitutions or quoting is kept whole.
 */
export function rulesFor(action: Pick<PendingAction, 'tool_name' | 'arguments'>): string[] {
  const args = action.arguments;
  if (action.tool_name === 'bash' && typeof args.command === 'string') {
    const line = args.command.trim();
    if (/[`$()'"\\{}]/.test(line)) return [`bash(${line})`];
    const commands = line
      .replace(/\s*\d*(>>?|<)(&\d+|\s*[^\s;&|]+)/g, '')
      .split(/&&|\|\||[;|&\n]/)
      .map((part) => part.trim())
      .filter(Boolean);
    return commands.length > 0 ? [...new Set(commands)].map((command) => `bash(${command})`) : [`bash(${line})`];
  }
  if (action.tool_name === 'file_editor' && typeof args.path === 'string' && !/[()]/.test(args.path)) return [`file_editor(${args.path})`];
  return [action.tool_name];
}
