// Recovery after a restart (run-recovery.ts): right after a clean stop, which ended and recorded
// every run, the records are counted by status and, when none says it runs, none is looked at;
// one that does is recovered. After a crash every conversation is looked at.
import { describe, expect, it } from 'vitest';
import { RunRecovery } from '../../src/core/agent/run-recovery.js';
import type { ConversationStore } from '../../src/core/conversations/conversation-store.js';
import type { ConversationStatus } from '../../src/core/schemas/event.js';
import { storedRecord } from '../support/stored-record.js';

function recovery(options: { afterCleanStop: boolean; statuses: ConversationStatus[] }) {
  const records = options.statuses.map((status, i) => storedRecord(`c-${i}`, { status }));
  const walked: string[] = [];
  const recovered: string[] = [];
  const counts = Object.fromEntries(['idle', 'running', 'paused', 'waiting_for_confirmation', 'waiting_for_input', 'finished', 'error', 'stuck'].map((status) => [status, 0])) as Record<ConversationStatus, number>;
  for (const record of records) counts[record.status] += 1;
  const conversations = {
    loadedAfterCleanStop: options.afterCleanStop,
    countsByStatus: () => ({ ...counts }),
    *all() {
      for (const record of records) {
        walked.push(record.id);
        yield record;
      }
    },
    record: (id: string) => records.find((record) => record.id === id)!,
  } as unknown as ConversationStore;
  const runs = { list: () => [], release: () => undefined };
  const recover = new RunRecovery({ conversations, runs: runs as never, journal: {} as never, session: async () => ({}) as never, clock: { now: () => new Date() } as never });
  // The recovery of one conversation is another test's (agent-restart): here, which ones it is asked for.
  recover.recover = async (id) => {
    recovered.push(id);
    return false;
  };
  return { recover, walked, recovered };
}

describe('recovery after a restart', () => {
  it('right after a clean stop, looks at no record when none says it runs', async () => {
    const { recover, walked, recovered } = recovery({ afterCleanStop: true, statuses: ['idle', 'finished', 'paused', 'error'] });
    await recover.recoverAfterRestart();
    expect(walked).toEqual([]);
    expect(recovered).toEqual([]);
  });

  it('right after a clean stop, recovers those that say they run (or wait for an answer), and only those', async () => {
    const { recover, recovered } = recovery({ afterCleanStop: true, statuses: ['idle', 'running', 'finished', 'waiting_for_input'] });
    await recover.recoverAfterRestart();
    expect(recovered).toEqual(['c-1', 'c-3']);
  });

  it('after a crash, looks at every conversation', async () => {
    const { recover, recovered } = recovery({ afterCleanStop: false, statuses: ['idle', 'finished', 'paused'] });
    await recover.recoverAfterRestart();
    expect(recovered).toEqual(['c-0', 'c-1', 'c-2']);
  });
});
