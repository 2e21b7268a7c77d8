// A user message goes one way: the conversation service hands it to the runtime, whose
// MessageIntake appends it (marked with the strategy it was taken with during a run) or refuses it.
import { describe, expect, it } from 'vitest';
import { MessageIntake } from '../../src/core/agent/message-intake.js';
import { TurnInterrupts } from '../../src/core/agent/turn-interrupts.js';
import { ConflictError } from '../../src/core/errors.js';
import type { AgentEvent, MultitaskStrategy, NewEvent } from '../../src/core/schemas/event.js';

const CONVERSATION = 'c1';
const message = { kind: 'message', source: 'user', role: 'user', content: 'Hi', output_schema: { type: 'object' } } as const;

/** An intake over fakes: what it appended, in order, and what else it asked of the runtime. */
function intake(options: { running: boolean }) {
  const calls: string[] = [];
  const appended: NewEvent[] = [];
  const interrupts = new TurnInterrupts();
  let seq = 10;
  const active = options.running ? { run: { id: 'r1' }, interrupts, inputFromSeq: 4 } : null;
  const session = { active, history: { lastSeq: seq } };
  const store = (event: NewEvent) => {
    appended.push(event);
    return { ...event, seq: ++seq } as unknown as AgentEvent;
  };
  const taker = new MessageIntake({
    session: async () => session as never,
    onUserMessage: async (_id, { run }) => {
      calls.push(`onUserMessage run=${run}`);
      return run ? 'r1' : null;
    },
    cancel: async () => {
      calls.push('cancel');
      session.active = null;
    },
    startRun: async () => {
      calls.push('startRun');
      return 'r2';
    },
    append: async (_id, event) => store(event),
    appendMessage: async (_id, event, { startsRun }) => {
      calls.push(`appendMessage startsRun=${startsRun}`);
      return store(event);
    },
  });
  const take = (strategy: MultitaskStrategy, run = true) => taker.take(CONVERSATION, { run, strategy, message });
  return { take, appended, calls, interrupts };
}

describe('MessageIntake: the runtime appends the message it is handed', () => {
  it('with no run going, the message is appended as it came, said to start a run, and starts one', async () => {
    const { take, appended, calls } = intake({ running: false });
    expect(await take('interrupt')).toEqual({ event: { ...message, seq: 11 }, runId: 'r1' });
    expect(appended).toEqual([message]);
    expect(calls).toEqual(['appendMessage startsRun=true', 'onUserMessage run=true']);
  });

  it('with `run: false` during a run, the message is appended unmarked and no run starts', async () => {
    const { take, appended, calls } = intake({ running: true });
    expect(await take('interrupt', false)).toEqual({ event: { ...message, seq: 11 }, runId: null });
    expect(appended).toEqual([message]);
    expect(calls).toEqual(['appendMessage startsRun=false', 'onUserMessage run=false']);
  });

  it('during a run, enqueue and interrupt append it marked with the strategy; interrupt stops the step', async () => {
    const { take, appended, interrupts } = intake({ running: true });
    expect((await take('enqueue')).runId).toBe('r1');
    expect(interrupts.pending).toBeNull();
    expect((await take('interrupt')).runId).toBe('r1');
    expect(interrupts.pending).toBe(12);
    expect(appended).toEqual([
      { ...message, multitask_strategy: 'enqueue' },
      { ...message, multitask_strategy: 'interrupt' },
    ]);
  });

  it('rollback cancels the run, records the rollback, then the message, and starts a new run', async () => {
    const { take, appended, calls } = intake({ running: true });
    expect(await take('rollback')).toEqual({ event: { ...message, multitask_strategy: 'rollback', seq: 12 }, runId: 'r2' });
    expect(appended).toEqual([{ kind: 'rollback', source: 'user', run_id: 'r1', forgotten_from_seq: 4, forgotten_to_seq: 10 }, { ...message, multitask_strategy: 'rollback' }]);
    expect(calls).toEqual(['cancel', 'appendMessage startsRun=false', 'startRun']);
  });

  it('reject refuses it during a run and appends nothing', async () => {
    const { take, appended } = intake({ running: true });
    await expect(take('reject')).rejects.toBeInstanceOf(ConflictError);
    expect(appended).toEqual([]);
  });
});
