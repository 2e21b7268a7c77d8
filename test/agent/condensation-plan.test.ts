import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ConversationHistory } from '../../src/core/agent/conversation-history.js';
import { planCondensation } from '../../src/core/agent/condensation-plan.js';
import type { AgentEvent, NewEvent } from '../../src/core/schemas/event.js';

const conversationId = randomUUID();

/** Folds events (seq 1, 2, 3… in order) into a history. */
function fold(events: NewEvent[], history = new ConversationHistory()): ConversationHistory {
  for (const event of events) history.apply({ ...event, id: randomUUID(), seq: history.lastSeq + 1, conversation_id: conversationId, timestamp: new Date().toISOString() } as AgentEvent);
  return history;
}

const user = (content: string): NewEvent => ({ kind: 'message', source: 'user', role: 'user', content });
const call = (id: string, command: string, responseId = id): NewEvent => ({ kind: 'action', source: 'agent', tool_call_id: id, tool_name: 'bash', arguments: { command }, thought: null, run_id: null, llm_response_id: responseId });
const result = (id: string, content: string): NewEvent => ({ kind: 'observation', source: 'environment', tool_call_id: id, tool_name: 'bash', content, is_error: false, data: {} });
const system: NewEvent = { kind: 'system_prompt', source: 'system', content: 'You are an agent.', tools: [] };

describe('planCondensation', () => {
  it('forgets the middle between keep_first and keep_last, with the seq range it came from', () => {
    // seq 1 system, 2 task, 3/4 call+result a, 5/6 b, 7/8 c, 9/10 d
    const history = fold([system, user('task'), call('a', 'echo a'), result('a', 'a'), call('b', 'echo b'), result('b', 'b'), call('c', 'echo c'), result('c', 'c'), call('d', 'echo d'), result('d', 'd')]);
    expect(planCondensation(history.entries(), { keepFirst: 1, keepLast: 2 })).toEqual({ start: 1, end: 7, fromSeq: 3, toSeq: 8 });
  });

  it('never starts or ends the block between a call and its result: it keeps more instead', () => {
    const history = fold([system, user('task'), call('a', 'echo a'), result('a', 'a'), call('b', 'echo b'), result('b', 'b'), call('c', 'echo c'), result('c', 'c')]);
    // keep_last 1 would keep only c's result: the cut moves before c's call.
    expect(planCondensation(history.entries(), { keepFirst: 1, keepLast: 1 })).toEqual({ start: 1, end: 5, fromSeq: 3, toSeq: 6 });
    // keep_first 2 would start the block on a's result: it starts after it.
    expect(planCondensation(history.entries(), { keepFirst: 2, keepLast: 2 })).toEqual({ start: 3, end: 5, fromSeq: 5, toSeq: 6 });
  });

  it('keeps the calls of one response together with all their results', () => {
    // One response with two calls (x, y) recorded call, result, call, result.
    const history = fold([system, user('task'), call('x', 'echo x', 'r1'), result('x', 'x'), call('y', 'echo y', 'r1'), result('y', 'y'), call('z', 'echo z'), result('z', 'z'), user('more')]);
    const entries = history.entries();
    expect(entries.map((entry) => entry.message.role)).toEqual(['user', 'assistant', 'tool', 'tool', 'assistant', 'tool']);
    // The last message waits after the turn (its response might still add calls).
    expect(history.waiting().map((entry) => entry.seq)).toEqual([9]);
    expect(planCondensation(entries, { keepFirst: 1, keepLast: 2 })).toEqual({ start: 1, end: 4, fromSeq: 3, toSeq: 6 });
    // Keeping 3 would start the kept part on y's result: no cut keeps 3.
    expect(planCondensation(entries, { keepFirst: 1, keepLast: 3 })).toBeNull();
  });

  it('a user message that waited for a result is not cut away from the seqs around it', () => {
    // The message (seq 4) arrives while call a is open: the history puts it after a's result (seq 5).
    const history = fold([system, user('task'), call('a', 'sleep 1'), user('while running'), result('a', 'a'), call('b', 'echo b'), result('b', 'b'), call('c', 'echo c'), result('c', 'c')]);
    const entries = history.entries();
    expect(entries.map((entry) => entry.seq)).toEqual([2, 3, 5, 4, 6, 7, 8, 9]);
    // Keeping 5 would cut right after a's result: seq 3..5 forgotten, seq 4 kept. No cut keeps 5.
    expect(planCondensation(entries, { keepFirst: 1, keepLast: 5 })).toBeNull();
    // Keeping 4, the message goes with the call it waited for.
    expect(planCondensation(entries, { keepFirst: 1, keepLast: 4 })).toEqual({ start: 1, end: 4, fromSeq: 3, toSeq: 5 });
  });

  it('nothing to condense when the kept messages cover the history', () => {
    const history = fold([system, user('task'), call('a', 'echo a'), result('a', 'a')]);
    expect(planCondensation(history.entries(), { keepFirst: 1, keepLast: 10 })).toBeNull();
  });
});

describe('the history fold with condensation and rollback events', () => {
  it('a condensation replaces the forgotten messages by the summary; folding the log again gives the same view', () => {
    const events: NewEvent[] = [system, user('task'), call('a', 'echo a'), result('a', 'a'), call('b', 'echo b'), result('b', 'b'), call('c', 'echo c'), result('c', 'c')];
    const condensation: NewEvent = { kind: 'condensation', source: 'system', summary: 'a and b were echoed', forgotten_from_seq: 3, forgotten_to_seq: 6, tokens_before: 900, tokens_after: 300, trigger: 'manual', run_id: null };
    const live = fold([...events, condensation]);
    const snapshot = live.snapshot();
    expect(snapshot.map((message) => message.role)).toEqual(['system', 'user', 'user', 'assistant', 'tool']);
    expect(snapshot[2]!.content).toContain('a and b were echoed');
    expect(snapshot[2]!.content).toContain('events #3–#6');
    expect(JSON.stringify(snapshot)).not.toContain('echo a');
    expect(live.lastPromptTokens).toBe(300);
    expect(fold([...events, condensation]).snapshot()).toEqual(snapshot);
    // A second condensation (after the first at seq 9 and d's call and result at 10, 11) takes the first summary in with the rest.
    expect(planCondensation(fold([call('d', 'echo d'), result('d', 'd')], live).entries(), { keepFirst: 1, keepLast: 2 })).toMatchObject({ fromSeq: 3, toSeq: 8 });
    const again = fold([{ ...condensation, summary: 'a to c', forgotten_from_seq: 3, forgotten_to_seq: 8 }], live).snapshot();
    expect(again.map((message) => message.role)).toEqual(['system', 'user', 'user', 'assistant', 'tool']);
    expect(again[2]!.content).toContain('a to c');
    expect(JSON.stringify(again)).not.toContain('a and b were echoed');
  });

  it('a rollback takes the run out (waiting user messages included) and nothing takes its place', () => {
    const events: NewEvent[] = [system, user('first'), { kind: 'message', source: 'agent', role: 'assistant', content: 'ok' }, user('task A'), call('a', 'sleep 30'), user('queued'), result('a', 'interrupted')];
    const history = fold([...events, { kind: 'rollback', source: 'user', run_id: randomUUID(), forgotten_from_seq: 4, forgotten_to_seq: 7 }, user('task B')]);
    expect(history.snapshot()).toEqual([
      { role: 'system', content: 'You are an agent.' },
      { role: 'user', content: 'first' },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: 'task B' },
    ]);
    expect(history.takePrompts()).toEqual(['first', 'task B']);
  });
});

describe('the token-budgeted tail (planFor)', () => {
  it('keeps the last messages that fit the budget, at most keep_last, never a result without its call', async () => {
    const { planFor } = await import('../../src/core/agent/condenser.js');
    const big = 'x'.repeat(4000);
    const history = fold([system, user('task'), call('a', 'echo a'), result('a', big), call('b', 'echo b'), result('b', big), call('c', 'echo c'), result('c', 'small')]);
    // About 1,000 tokens a big result: a budget of 500 keeps c's call and result; 1,100 keeps b's too.
    expect(planFor(history, { keepFirst: 1, keepLast: 10, tailTokens: 500 })).toMatchObject({ start: 1, end: 5, fromSeq: 3, toSeq: 6 });
    expect(planFor(history, { keepFirst: 1, keepLast: 10, tailTokens: 1100 })).toMatchObject({ start: 1, end: 3, fromSeq: 3, toSeq: 4 });
    // A budget that fits nothing forgets everything after the first message.
    expect(planFor(history, { keepFirst: 1, keepLast: 10, tailTokens: 5 })).toMatchObject({ start: 1, end: 7, fromSeq: 3, toSeq: 8 });
    // keep_last still caps the tail when everything fits.
    expect(planFor(history, { keepFirst: 1, keepLast: 2, tailTokens: 100_000 })).toMatchObject({ start: 1, end: 5 });
  });
});

describe('estimateTokens', () => {
  it('counts text, calls and the reasoning an assistant message carries back', async () => {
    const { estimateTokens } = await import('../../src/core/agent/token-estimate.js');
    const plain = estimateTokens({ role: 'assistant', content: 'a'.repeat(400) });
    expect(plain).toBe(104);
    expect(estimateTokens({ role: 'assistant', content: 'a'.repeat(400), reasoning: { text: 'r'.repeat(800) } })).toBe(plain + 200);
    expect(estimateTokens({ role: 'assistant', content: null, tool_calls: [{ id: 'c', name: 'bash', arguments: '{"command":"ls"}' }] })).toBeGreaterThan(8);
  });
});
