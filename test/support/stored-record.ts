import type { ConversationRecord } from '../../src/core/conversations/conversation-record.js';

/**
 * A conversation record as the repository stores it, with the fewest fields a record needs
 * (for tests that write records, or read them, without a server): `overrides` replaces any.
 */
export function storedRecord(id: string, overrides: Record<string, unknown> = {}): ConversationRecord {
  const now = '2026-11-23T01:00:00.000Z';
  return {
    id,
    title: null,
    status: 'idle',
    workdir: '/tmp/none',
    workdir_created: false,
    llm: null,
    tools: ['bash'],
    max_iterations_per_run: 500,
    confirmation_mode: false,
    pending_actions: [],
    current_run_id: null,
    usage: { prompt_tokens: 0, completion_tokens: 0, cost: 0 },
    created_at: now,
    updated_at: now,
    metadata: {},
    secrets: {},
    ...overrides,
  } as unknown as ConversationRecord;
}
