import fs from 'node:fs';
import path from 'node:path';
import { FileEventLog } from '../../src/adapters/files/event-log/file-event-log.js';
import { MemoryEventLog } from '../../src/core/events/memory-event-log.js';
import type { EventLog } from '../../src/core/events/event-log.js';
import { eventLogContract } from '../contract/event-log-contract.js';
import { tempDir } from '../support/agentd.js';

eventLogContract('in memory', {
  open: async () => new MemoryEventLog(),
  cleanup: async () => undefined,
});

let dir = '';
const openFileLog = (): EventLog => new FileEventLog({ conversationsDir: path.join(dir, 'conversations'), firehoseFile: path.join(dir, 'firehose.idx') });
eventLogContract('files', {
  open: async () => {
    dir = tempDir('agentd-contract-');
    return openFileLog();
  },
  reopen: async (log) => {
    await log.close();
    return openFileLog();
  },
  tearTail: (conversationId) => fs.appendFileSync(path.join(dir, 'conversations', conversationId, 'events.jsonl'), '{"id":"torn","seq":13,"kind":"mess'),
  cleanup: async () => fs.rmSync(dir, { recursive: true, force: true }),
});
