/**
 * ConversationStore hands out the same frozen view of a conversation until it changes (the HTTP
 * layer keeps that view's JSON for as long as it gets the same object): every transition, and
 * every move of its event count or updated_at, must give a new view that shows the change. A
 * view that outlived its conversation's change would be served stale.
 */
import { randomUUID } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import type { ConversationRecord, ConversationRepository } from '../../src/core/conversations/conversation-record.js';
import { ConversationStore } from '../../src/core/conversations/conversation-store.js';
import { placeholderRecord } from '../../src/core/conversations/placeholder-record.js';
import { DamagedDataError } from '../../src/core/errors.js';
import { MemoryEventLog } from '../../src/core/events/memory-event-log.js';
import type { Conversation } from '../../src/core/schemas/conversation.js';

class MemoryRepository implements ConversationRepository {
  async loadAll() {
    return { records: [], damaged: [] };
  }
  save(): void {}
  remove(): void {}
}

const T0 = '2026-01-01T00:00:00.000Z';

function newRecord(): ConversationRecord {
  const { quarantine: _quarantine, ...record } = placeholderRecord({ id: randomUUID(), damage: { file: '', line: null, reason: '' }, now: T0 });
  return { ...record, status: 'idle', tools: ['bash'], max_iterations_per_run: 10 };
}

let store: ConversationStore;
let id: string;

beforeEach(() => {
  store = new ConversationStore({ repository: new MemoryRepository(), log: new MemoryEventLog() });
  const record = newRecord();
  id = record.id;
  store.add(record);
});

const usage = { prompt_tokens: 7, completion_tokens: 3, cost: 0.5, cached_tokens: 1, reasoning_tokens: 2 };
const action = { tool_call_id: 'call-1', tool_name: 'bash', arguments: { command: 'ls' }, event_id: randomUUID() };
const appended = (seq: number, timestamp: string) => ({ globalCursor: seq, event: { conversation_id: id, seq, timestamp } }) as never;

const changes: Array<[transition: string, change: () => void, shows: (view: Conversation) => void]> = [
  ['setStatus', () => store.setStatus(id, 'running', 'run-1'), (view) => expect([view.status, view.current_run_id]).toEqual(['running', 'run-1'])],
  ['startRunning', () => store.startRunning(id, 'run-2'), (view) => expect([view.status, view.current_run_id]).toEqual(['running', 'run-2'])],
  ['setPendingActions', () => store.setPendingActions(id, [action]), (view) => expect(view.pending_actions).toEqual([action])],
  ['addUsage', () => store.addUsage(id, usage), (view) => expect(view.usage).toEqual(usage)],
  ['configure', () => store.configure(id, { title: 'renamed', max_iterations_per_run: 3 }), (view) => expect([view.title, view.max_iterations_per_run]).toEqual(['renamed', 3])],
  ['setSecrets', () => store.setSecrets(id, { secrets: { TOKEN: 'value-1234' } }), (view) => expect(view.updated_at > T0).toBe(true)],
  ['restore', () => (store.setPendingActions(id, [action]), store.get(id), store.restore(id, { status: 'paused', pending_actions: [] })), (view) => expect([view.status, view.pending_actions]).toEqual(['paused', []])],
  ['failRunning', () => (store.setStatus(id, 'running', 'run-3'), store.get(id), store.failRunning(id)), (view) => expect([view.status, view.current_run_id]).toEqual(['error', null])],
  ['an event appended (summary reader)', () => store.summaryReader.read(appended(4, '2026-01-02T00:00:00.000Z')), (view) => expect([view.event_count, view.updated_at]).toEqual([4, '2026-01-02T00:00:00.000Z'])],
  ['an event counted with an older timestamp', () => store.summaryReader.read(appended(2, T0)), (view) => expect(view.event_count).toBe(2)],
  ["another instance's event (follow)", () => store.follow({ conversation_id: id, seq: 9, timestamp: '2026-01-03T00:00:00.000Z' }), (view) => expect([view.event_count, view.updated_at]).toEqual([9, '2026-01-03T00:00:00.000Z'])],
  ['a later updated_at alone (follow, no new event)', () => store.follow({ conversation_id: id, seq: 0, timestamp: '2026-01-04T00:00:00.000Z' }), (view) => expect([view.event_count, view.updated_at]).toEqual([0, '2026-01-04T00:00:00.000Z'])],
  ['quarantineFound', () => store.quarantineFound(id, new DamagedDataError({ file: 'events.jsonl', line: 1, reason: 'bad' }, '/x')), (view) => expect([view.status, view.quarantine?.file]).toEqual(['error', 'events.jsonl'])],
  ['sync (another instance saved it)', () => store.sync(id, { ...store.find(id), title: 'synced', usage: { ...usage } } as ConversationRecord), (view) => expect(view.title).toBe('synced')],
];

describe('ConversationStore views', () => {
  it('hands out the same frozen object while the conversation is unchanged', () => {
    const first = store.get(id);
    expect(store.get(id)).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
  });

  it.each(changes)('%s: the next read is a new view showing the change', (_transition, change, shows) => {
    const before = store.get(id);
    const json = JSON.stringify(before);
    change();
    const after = store.get(id);
    expect(after).not.toBe(before);
    shows(after);
    // The view handed out before is a snapshot: it still says what it said.
    expect(JSON.stringify(before)).toBe(json);
    expect(store.get(id)).toBe(after);
  });

  it('a list page makes its own views and keeps none', () => {
    const view = store.get(id);
    const [listed] = store.list({ sort: 'created_at', order: 'asc', limit: 10 }).items;
    expect(listed).toEqual(view);
    expect(listed).not.toBe(view);
    expect(store.get(id)).toBe(view);
  });

  it('a deleted conversation and one added again under its id get no old view', () => {
    const view = store.get(id);
    store.remove(id, { persisted: false });
    expect(() => store.get(id)).toThrow();
    store.add({ ...newRecord(), id, title: 'again' });
    expect(store.get(id)).not.toBe(view);
    expect(store.get(id).title).toBe('again');
  });
});
