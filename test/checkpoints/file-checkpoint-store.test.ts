/**
 * The file checkpoint store keeps each conversation's newest checkpoint in memory, not the list:
 * `list` reads checkpoints.jsonl (so it shows what is on disk, lines it did not write included),
 * `last` is the newest whether this store wrote it or read it, a torn last line is cut off before
 * the next append (never by a list), and an evicted or released conversation's newest checkpoint
 * is read again when next asked.
 */
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { FileCheckpointStore } from '../../src/adapters/git/file-checkpoint-store.js';
import type { CheckpointRecord } from '../../src/core/checkpoints/checkpoint-schemas.js';
import { tempDir } from '../support/agentd.js';
import { openFilesWith } from '../support/open-files.js';

let dir: string | undefined;
afterEach(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

const checkpointOf = (conversationId: string, seq: number): CheckpointRecord => ({
  id: randomUUID(),
  conversation_id: conversationId,
  seq,
  run_id: null,
  created_at: '2026-01-01T00:00:00.000Z',
  files_changed: [],
  trigger: 'tool',
  tree: `tree-${seq}`,
  commit: `commit-${seq}`,
});

describe('FileCheckpointStore', () => {
  it('lists what the file holds (not a list kept in memory) and keeps the newest checkpoint at hand', () => {
    dir = tempDir('agentd-checkpoints-');
    const conversation = randomUUID();
    fs.mkdirSync(path.join(dir, conversation));
    const store = new FileCheckpointStore(dir);
    expect(store.last(conversation)).toBeUndefined();
    const first = checkpointOf(conversation, 1);
    const second = checkpointOf(conversation, 5);
    store.append(first);
    store.append(second);
    expect(store.list(conversation)).toEqual([first, second]);
    expect(store.last(conversation)).toEqual(second);

    // A line this store did not write (another instance on shared storage) is listed: the list comes from the file.
    const written = checkpointOf(conversation, 9);
    fs.appendFileSync(path.join(dir, conversation, 'checkpoints.jsonl'), `${JSON.stringify(written)}\n`);
    expect(store.list(conversation).map((checkpoint) => checkpoint.seq)).toEqual([1, 5, 9]);
    // The newest at hand is this store's own until it is told to read again (evict: another instance took the conversation over).
    expect(store.last(conversation)).toEqual(second);
    store.evict(conversation);
    expect(store.last(conversation)).toEqual(written);

    // Released, then read again by a new store: the same newest checkpoint.
    store.release(conversation);
    expect(store.last(conversation)).toEqual(written);
    expect(new FileCheckpointStore(dir).last(conversation)).toEqual(written);
  });

  it('cuts a torn last line off before the first append after a start, and a list leaves it alone', () => {
    dir = tempDir('agentd-checkpoints-');
    const conversation = randomUUID();
    fs.mkdirSync(path.join(dir, conversation));
    const file = path.join(dir, conversation, 'checkpoints.jsonl');
    const kept = checkpointOf(conversation, 1);
    fs.writeFileSync(file, `${JSON.stringify(kept)}\n{"id":"torn`);
    const store = new FileCheckpointStore(dir);
    // A reader (an API list) skips the torn line without cutting it: only the writer repairs the file.
    expect(store.list(conversation)).toEqual([kept]);
    expect(fs.readFileSync(file, 'utf8')).toBe(`${JSON.stringify(kept)}\n{"id":"torn`);
    const next = checkpointOf(conversation, 2);
    store.append(next);
    expect(fs.readFileSync(file, 'utf8')).toBe(`${JSON.stringify(kept)}\n${JSON.stringify(next)}\n`);
    expect(new FileCheckpointStore(dir).list(conversation)).toEqual([kept, next]);
    expect(store.last(conversation)).toEqual(next);
  });

  it('keeps a conversation\'s file open between appends, closed once it is released, evicted, forgotten or the store closed', () => {
    dir = tempDir('agentd-checkpoints-open-');
    const store = new FileCheckpointStore(dir, { ownDirectory: true });
    const ids = [randomUUID(), randomUUID(), randomUUID()] as const;
    for (const id of ids) {
      store.append(checkpointOf(id, 1));
      store.append(checkpointOf(id, 2));
      expect(openFilesWith(id)).toHaveLength(1);
    }
    store.release(ids[0]);
    store.evict(ids[1]);
    store.forget(ids[2]);
    for (const id of ids) expect(openFilesWith(id)).toEqual([]);
    expect(store.list(ids[0]).map((checkpoint) => checkpoint.seq)).toEqual([1, 2]);
    expect(fs.existsSync(path.join(dir, ids[2]))).toBe(false);
    store.append(checkpointOf(ids[0], 3));
    store.close();
    expect(openFilesWith(ids[0])).toEqual([]);
    expect(store.list(ids[0]).map((checkpoint) => checkpoint.seq)).toEqual([1, 2, 3]);
  });
});
