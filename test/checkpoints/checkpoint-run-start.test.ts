// CheckpointService.atRunStart: the checkpoint taken at a run's start walks the workdir after the
// run's first LLM request is on its way, not among the steps leading to it; the run's first
// file-changing call still waits for it. The service with an in-memory shadow and store.
import { describe, expect, it } from 'vitest';
import { CheckpointService, type CheckpointServiceDeps } from '../../src/core/checkpoints/checkpoint-service.js';
import type { CheckpointRecord } from '../../src/core/checkpoints/checkpoint-schemas.js';
import type { ConversationRecord } from '../../src/core/conversations/conversation-record.js';

function service(order: string[], records: CheckpointRecord[]): CheckpointService {
  let walks = 0;
  const deps = {
    enabled: true,
    log: { lastSeq: async () => records.length + 3 },
    store: { last: () => records.at(-1) ?? null, append: (record: CheckpointRecord) => void records.push(record), gitDirOf: () => '/shadow', list: () => records },
    shadow: {
      available: async () => ({ ok: true }),
      snapshot: async () => {
        walks += 1;
        order.push(`walk ${walks}`);
        return `tree-${walks}`;
      },
      changes: async () => [],
      keep: async () => 'commit',
    },
    isRunning: () => true,
    maskText: (_id: string, text: string) => text,
  };
  return new CheckpointService(deps as unknown as CheckpointServiceDeps);
}

const record = { id: 'c1', workdir: '/work' } as unknown as ConversationRecord;

describe("a run's start checkpoint", () => {
  it("walks the workdir after the steps that lead to the run's first LLM request, and the first file-changing call waits for it", async () => {
    const order: string[] = [];
    const records: CheckpointRecord[] = [];
    const checkpoints = service(order, records);
    const start = checkpoints.atRunStart(record, 'run-1');
    // The run's steps up to its request: promise continuations only, nothing waits for I/O.
    for (let i = 0; i < 200; i++) await Promise.resolve();
    order.push('LLM request sent');
    // The answer's first call changes files: its checkpoint comes after the start's.
    const beforeTool = checkpoints.beforeTool(record, 'run-1', { name: 'bash', args: { command: 'touch a' } });
    await Promise.all([start, beforeTool]);
    expect(order).toEqual(['LLM request sent', 'walk 1', 'walk 2']);
    expect(records.map((checkpoint) => [checkpoint.trigger, checkpoint.tree])).toEqual([
      ['run_start', 'tree-1'],
      ['tool', 'tree-2'],
    ]);
  });
});
