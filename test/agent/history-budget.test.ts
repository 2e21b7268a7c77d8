// The folded LLM histories the sessions keep stay within their budget (AGENTD_HISTORY_CACHE_MB):
// the ones used longest ago are dropped first and folded again, the same, at their next use; the
// one just used, and one a run holds, are never dropped.
import { describe, expect, it } from 'vitest';
import type { ActiveRun } from '../../src/core/agent/agent-session.js';
import { AgentSessions } from '../../src/core/agent/agent-sessions.js';
import type { EventLog } from '../../src/core/events/event-log.js';
import type { AgentEvent } from '../../src/core/schemas/event.js';

/** A stored log of a few conversations: a system prompt, then user and agent messages. */
function storedLog(ids: string[]): { log: EventLog; reads: Map<string, number> } {
  const events = new Map<string, AgentEvent[]>();
  for (const id of ids) {
    const add = (event: Record<string, unknown>) => {
      const list = events.get(id) ?? [];
      list.push({ ...event, conversation_id: id, seq: list.length + 1, timestamp: '2026-11-24T00:00:00.000Z', id: `${id}-${list.length + 1}` } as unknown as AgentEvent);
      events.set(id, list);
    };
    add({ kind: 'system_prompt', source: 'system', content: `You help with ${id}. ${'Be brief. '.repeat(100)}`, tools: [] });
    for (let turn = 0; turn < 5; turn++) {
      add({ kind: 'message', source: 'user', role: 'user', content: `question ${turn} about ${id}` });
      add({ kind: 'message', source: 'agent', role: 'assistant', content: `answer ${turn}: ${'é'.repeat(50)}` });
    }
  }
  const reads = new Map<string, number>();
  const log = {
    read: async (id: string, options: { cursorSeq?: number; limit?: number }) => {
      if ((options.cursorSeq ?? 0) === 0) reads.set(id, (reads.get(id) ?? 0) + 1);
      return (events.get(id) ?? []).filter((event) => event.seq > (options.cursorSeq ?? 0)).slice(0, options.limit ?? 1000).map((event) => ({ event }));
    },
  } as unknown as EventLog;
  return { log, reads };
}

describe('the histories kept between runs', () => {
  it('stay within the budget: the ones used longest ago are dropped, and folded again the same at next use', async () => {
    const { log: sizing } = storedLog(['a']);
    const one = new AgentSessions(sizing);
    const size = (await one.get('a')).history.size;
    expect(one.historyCache).toEqual({ bytes: size, released: 0 });
    // About its texts: the system prompt's (about 1 KB) and ten messages', two-byte answers at two bytes a character.
    expect(size).toBeGreaterThan(1000 + 5 * 2 * 50);
    expect(size).toBeLessThan(2 * (1000 + 5 * 2 * 50) + 11 * 64);

    const { log, reads } = storedLog(['a', 'b', 'c']);
    // Room for two histories and a half.
    const sessions = new AgentSessions(log, { historyBudget: Math.floor(2.5 * size) });
    const a = await sessions.get('a');
    const before = JSON.stringify(a.history.encoded().items);
    await sessions.get('b');
    expect(sessions.historyCache).toEqual({ bytes: 2 * size, released: 0 });
    await sessions.get('c');
    expect(sessions.historyCache).toEqual({ bytes: 2 * size, released: 1 });
    expect(a.stale).toBe(true);
    expect(a.history.size).toBe(0);

    // At its next use it is folded from the log again, the same; b is now the one used longest ago.
    expect(await sessions.get('a')).toBe(a);
    expect(reads.get('a')).toBe(2);
    expect(JSON.stringify(a.history.encoded().items)).toBe(before);
    expect(sessions.peek('b')!.stale).toBe(true);
    expect(sessions.historyCache).toEqual({ bytes: 2 * size, released: 2 });

    // A run holds c: b's next use drops a instead, though c was used longer ago.
    sessions.peek('c')!.active = {} as ActiveRun;
    await sessions.get('b');
    expect(sessions.peek('c')!.stale).toBe(false);
    expect(a.stale).toBe(true);
    expect(sessions.historyCache.released).toBe(3);

    // Forgotten (deleted or released while idle): its size no longer counts.
    sessions.forget('b');
    expect(sessions.historyCache.bytes).toBe(size);
  });

  it('keep the history in use even when it alone is over the budget', async () => {
    const { log } = storedLog(['a', 'b']);
    const sessions = new AgentSessions(log, { historyBudget: 0 });
    const a = await sessions.get('a');
    expect(a.stale).toBe(false);
    const b = await sessions.get('b');
    expect([a.stale, b.stale]).toEqual([true, false]);
    // A run's end counts what it added (sessions.use): still the one kept.
    sessions.use(b);
    expect([a.stale, b.stale]).toEqual([true, false]);
    expect(sessions.historyCache).toEqual({ bytes: b.history.size, released: 1 });
  });
});
