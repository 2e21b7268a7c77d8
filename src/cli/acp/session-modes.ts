import type * as acp from '@agentclientprotocol/sdk';
import type { Conversation, UpdateConversationConfigInput } from '../../client/index.js';

type Permissions = Conversation['permissions'];

/** Tools that only keep the agent's own books or talk to the user: never worth a prompt. */
const BOOKKEEPING = ['task_tracker', 'finish', 'ask_user', 'skill', 'slash_command'];
/** Tools that read and never change anything. */
const READ_ONLY = ['glob', 'grep', 'web_fetch', 'web_search'];

/**
 * The session modes an editor offers, each a preset of the conversation's permission rules:
 * the preset's own rules are added to (and on a change of mode, taken from) the rules the user
 * added by answering "always", which stay.
 */
export const MODES = [
  { id: 'default', name: 'Ask every time', description: 'Every action asks for permission first.', default: 'ask', allow: BOOKKEEPING },
  { id: 'accept_edits', name: 'Accept edits', description: 'File edits run without asking; other actions ask.', default: 'ask', allow: [...BOOKKEEPING, 'file_editor'] },
  { id: 'plan', name: 'Plan only', description: 'Reads and plans; anything that changes the workdir is refused.', default: 'deny', allow: [...BOOKKEEPING, ...READ_ONLY] },
  { id: 'bypass', name: 'Bypass permissions', description: 'Every action runs without asking (deny rules still hold).', default: 'allow', allow: [] },
] as const satisfies readonly { id: string; name: string; description: string; default: 'ask' | 'allow' | 'deny'; allow: readonly string[] }[];
export type ModeId = (typeof MODES)[number]['id'];

const PRESET_RULES = new Set<string>(MODES.flatMap((mode) => mode.allow));

export function isModeId(value: string): value is ModeId {
  return MODES.some((mode) => mode.id === value);
}

/** The mode a conversation's rules are in (read back from the rules: the conversation is the only state). */
export function modeOf(conversation: Conversation): ModeId {
  const permissions = conversation.permissions;
  if (permissions.default === 'allow' && !conversation.confirmation_mode) return 'bypass';
  if (permissions.default === 'deny') return 'plan';
  if (permissions.default === 'ask' && permissions.allow?.includes('file_editor')) return 'accept_edits';
  return 'default';
}

export function modeState(conversation: Conversation): acp.SessionModeState {
  return { currentModeId: modeOf(conversation), availableModes: MODES.map(({ id, name, description }) => ({ id, name, description })) };
}

/** The rules of `mode`, keeping the user's own. */
export function permissionsFor(mode: ModeId, current: Permissions | undefined): Permissions {
  const preset = MODES.find((candidate) => candidate.id === mode)!;
  const own = (current?.allow ?? []).filter((rule) => !PRESET_RULES.has(rule));
  return { ...current, default: preset.default, allow: [...preset.allow, ...own] };
}

/** The rules with one more rule (an "always" answer), unless they have it already. */
export function withRule(current: Permissions | undefined, list: 'allow' | 'deny', rule: string): Permissions {
  const rules = current?.[list] ?? [];
  return rules.includes(rule) ? (current ?? {}) : { ...current, [list]: [...rules, rule] };
}

const EFFORTS = ['none', 'low', 'medium', 'high'] as const;

/** The options an editor shows beside the prompt: the model and the reasoning effort. */
export function configOptions(conversation: Conversation): acp.SessionConfigOption[] {
  const model = conversation.llm?.model ?? '';
  const effort = conversation.llm?.reasoning_effort ?? 'medium';
  return [
    { type: 'select', id: 'model', name: 'Model', category: 'model', currentValue: model, options: [{ value: model, name: model }] },
    { type: 'select', id: 'reasoning_effort', name: 'Reasoning effort', category: 'thought_level', currentValue: effort, options: EFFORTS.map((value) => ({ value, name: value })) },
  ];
}

/** The config change a `session/set_config_option` asks for, or a reason it cannot be made. */
export function configChange(configId: string, value: unknown): UpdateConversationConfigInput | string {
  if (typeof value !== 'string' || !value) return `${configId} takes a non-empty string value`;
  if (configId === 'model') return { llm: { model: value } };
  if (configId === 'reasoning_effort') {
    if (!(EFFORTS as readonly string[]).includes(value)) return `reasoning_effort is one of ${EFFORTS.join(', ')}`;
    return { llm: { reasoning_effort: value as (typeof EFFORTS)[number] } };
  }
  return `unknown config option ${configId}: model, reasoning_effort`;
}
