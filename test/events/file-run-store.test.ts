/**
 * The file run store's cache holds a conversation's runs only until it is released (an idle
 * conversation): released runs are read from runs.jsonl again, complete, and a save after the
 * release appends to the same file (the newest state of each run wins), a torn last line included.
 */
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { FileRunStore } from '../../src/adapters/files/file-run-store.js';
import type { Run } from '../../src/core/agent/run-record.js';
import { DamagedDataError } from '../../src/core/errors.js';
import { CreateConversationBody } from '../../src/core/schemas/conversation.js';
import { startServer, tempDir } from '../support/agentd.js';
import { openFilesWith } from '../support/open-files.js';

let dir: string | undefined;
afterEach(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

const usage = { prompt_tokens: 0, completion_tokens: 0, cost: 0 };
const runOf = (conversationId: string, status: Run['status'], id = randomUUID()): Run => ({
  id,
  conversation_id: conversationId,
  status,
  started_at: '2026-01-01T00:00:00.000Z',
  ended_at: status === 'running' ? null : '2026-01-01T00:00:01.000Z',
  iterations: 1,
  usage,
  outcome: status === 'running' ? null : 'finished',
});

describe('FileRunStore', () => {
  it('reads a released conversation\'s runs from its file again, and a save after the release keeps every run', () => {
    dir = tempDir('agentd-runs-');
    const store = new FileRunStore(dir);
    const conversation = randomUUID();
    const first = runOf(conversation, 'running');
    store.save(first);
    store.save({ ...first, status: 'completed', outcome: 'finished', ended_at: '2026-01-01T00:00:02.000Z' });
    const second = runOf(conversation, 'completed');
    store.save(second);
    const before = store.list(conversation);
    expect(before.map((run) => [run.id, run.status])).toEqual([[first.id, 'completed'], [second.id, 'completed']]);

    store.release(conversation);
    const file = path.join(dir, conversation, 'runs.jsonl');
    // What the file holds is what a released conversation lists (the cache is gone: a line added meanwhile shows).
    const third = runOf(conversation, 'failed');
    fs.appendFileSync(file, `${JSON.stringify(third)}\n`);
    expect(store.list(conversation)).toEqual([...before, third]);

    store.release(conversation);
    fs.appendFileSync(file, '{"torn'); // a crash mid-append
    const fourth = runOf(conversation, 'running');
    store.save(fourth); // first use after the release: the torn line is cut off before the append
    store.save({ ...fourth, status: 'paused', outcome: 'paused', ended_at: '2026-01-01T00:00:03.000Z' });
    store.release(conversation);
    expect(store.list(conversation).map((run) => [run.id, run.status])).toEqual([[first.id, 'completed'], [second.id, 'completed'], [third.id, 'failed'], [fourth.id, 'paused']]);
    expect(new FileRunStore(dir).list(conversation)).toEqual(store.list(conversation));
  });
  it('holds no idle conversation\'s runs after a start (right after a clean stop start-up does not read them): read from the file when used', async () => {
    dir = tempDir('agentd-runs-start-');
    let server = await startServer({ dataDir: dir, listen: false });
    const id = (await server.services.conversations.create(CreateConversationBody.parse({ title: 'held' }))).record.id;
    const file = path.join(dir, 'conversations', id, 'runs.jsonl');
    const first = runOf(id, 'completed');
    fs.appendFileSync(file, `${JSON.stringify(first)}\n`);
    await server.close();
    server = await startServer({ dataDir: dir, listen: false });
    try {
      // A line the server did not write, added after the start: listed only if the runs are read again.
      const second = runOf(id, 'failed');
      fs.appendFileSync(file, `${JSON.stringify(second)}\n`);
      const page = await server.app.inject({ method: 'GET', url: `/conversations/${id}/runs?order=asc`, headers: server.auth });
      expect((page.json() as { items: Run[] }).items.map((run) => [run.id, run.status])).toEqual([[first.id, 'completed'], [second.id, 'failed']]);
    } finally {
      await server.close();
    }
  });
  it('reports runs found damaged when first read, once, naming the conversation and the line; a healthy conversation is not reported', () => {
    dir = tempDir('agentd-runs-damaged-');
    const reported: [string, DamagedDataError][] = [];
    const store = new FileRunStore(dir, { onDamaged: (conversationId, error) => reported.push([conversationId, error]) });
    const damaged = randomUUID();
    const healthy = randomUUID();
    fs.mkdirSync(path.join(dir, damaged));
    fs.writeFileSync(path.join(dir, damaged, 'runs.jsonl'), `${JSON.stringify(runOf(damaged, 'completed'))}\nnot a run\n`);
    store.save(runOf(healthy, 'completed'));
    expect(() => store.list(damaged)).toThrow(DamagedDataError);
    expect(store.list(healthy)).toHaveLength(1);
    expect(reported).toHaveLength(1);
    expect(reported[0]![0]).toBe(damaged);
    expect(reported[0]![1].damage).toMatchObject({ file: 'runs.jsonl', line: 2 });
  });

  it('keeps a running conversation\'s file open between saves, and closes it when the conversation is released, dropped or the store closed', () => {
    dir = tempDir('agentd-runs-open-');
    const store = new FileRunStore(dir);
    const [one, two] = [randomUUID(), randomUUID()];
    const run = runOf(one, 'running');
    store.save(run);
    store.save({ ...run, iterations: 2 });
    store.save(runOf(two, 'running'));
    expect(openFilesWith(one)).toHaveLength(1);
    expect(openFilesWith(two)).toHaveLength(1);
    store.release(one);
    expect(openFilesWith(one)).toEqual([]);
    expect(store.list(one).map((saved) => saved.iterations)).toEqual([2]);
    store.drop(two);
    expect(openFilesWith(two)).toEqual([]);
    expect(fs.existsSync(path.join(dir, two, 'runs.jsonl'))).toBe(false);
    store.save({ ...run, iterations: 3 });
    expect(openFilesWith(one)).toHaveLength(1);
    store.close();
    expect(openFilesWith(one)).toEqual([]);
    expect(new FileRunStore(dir).list(one).map((saved) => saved.iterations)).toEqual([3]);
  });
});
