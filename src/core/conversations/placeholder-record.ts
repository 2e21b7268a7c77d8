import type { Damage } from '../errors.js';
import type { ConversationRecord } from './conversation-record.js';
import { zeroUsage } from '../schemas/usage.js';

/**
 * What stands for a conversation whose record cannot be read: its id (the directory's name),
 * status `error` and the damage. It is quarantined, so nothing ever saves it.
 */
export function placeholderRecord(options: { id: string; damage: Damage; now: string }): ConversationRecord {
  return {
    id: options.id,
    title: null,
    status: 'error',
    workdir: '',
    workdir_created: false,
    llm: null,
    tools: [],
    max_iterations_per_run: 1,
    confirmation_mode: false,
    pending_actions: [],
    current_run_id: null,
    usage: zeroUsage(),
    created_at: options.now,
    updated_at: options.now,
    metadata: {},
    secrets: {},
    quarantine: options.damage,
  };
}
