// The records snapshot of a clean shutdown (issue 19, P4): the next start takes each record from
// it while the record's file is as the snapshot saw it, and reads the file otherwise. What
// changed, went or was damaged since is read from its file (changed, gone, quarantined as
// today); a damaged snapshot, or one sealed with another key, is ignored; the snapshot is taken
// (removed) at start-up so that a crash never leaves a stale one; no secret is in it in clear.
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileConversationRepository } from '../src/adapters/file-conversation-repository.js';
import type { ConversationRecord } from '../src/core/conversations/conversation-record.js';
import { SecretBox } from '../src/core/secrets/secret-box.js';
import { tempDir } from './support/agentd.js';
import { storedRecord } from './support/stored-record.js';

let dataDir: string;
let conversationsDir: string;
let snapshotFile: string;
const box = new SecretBox(SecretBox.keyFromText('k'.repeat(64)));
const now = '2026-11-23T01:00:00.000Z';

function record(title: string, secret: string): ConversationRecord {
  return storedRecord(randomUUID(), { title, tools: ['bash', 'glob'], secrets: { TOKEN: secret } });
}

const repository = (key = box) => new FileConversationRepository(conversationsDir, key, { snapshotFile });
const titles = (records: readonly ConversationRecord[]) => Object.fromEntries(records.map((r) => [r.id, r.title]));

beforeEach(() => {
  dataDir = tempDir('agentd-snapshot-');
  conversationsDir = path.join(dataDir, 'conversations');
  snapshotFile = path.join(dataDir, 'conversations.snapshot');
});
afterEach(() => fs.rmSync(dataDir, { recursive: true, force: true }));

/** Three records saved to their files, then held in memory with a title the files do not have (as usage or updated_at are held). */
async function shutDownCleanly(): Promise<ConversationRecord[]> {
  const records = [record('one', 'secret-value-one-4f2a'), record('two', 'secret-value-two-9c1b'), record('three', 'secret-value-three-77d0')];
  const repo = repository();
  for (const r of records) repo.save(r);
  const held = records.map((r) => ({ ...r, title: `${r.title} (held)` }));
  await repo.saveSnapshot(held);
  return held;
}

describe('the records snapshot of a clean shutdown', () => {
  it('gives each record whose file is unchanged, as it was held, and is taken at start-up', async () => {
    const held = await shutDownCleanly();
    expect(fs.existsSync(snapshotFile)).toBe(true);
    const { records, damaged } = await repository().loadAll();
    expect(damaged).toEqual([]);
    // The titles held in memory, not the files': these came from the snapshot.
    expect(titles(records)).toEqual(titles(held));
    expect(records.find((r) => r.title === 'one (held)')!.secrets).toEqual({ TOKEN: 'secret-value-one-4f2a' });
    // Taken: a crash from here on reads the files.
    expect(fs.existsSync(snapshotFile)).toBe(false);
    const again = await repository().loadAll();
    expect(Object.values(titles(again.records)).sort()).toEqual(['one', 'three', 'two']);
  });

  it('holds no secret in clear', async () => {
    await shutDownCleanly();
    const bytes = fs.readFileSync(snapshotFile);
    for (const secret of ['secret-value-one-4f2a', 'secret-value-two-9c1b', 'secret-value-three-77d0', 'TOKEN', 'held']) expect(bytes.includes(secret)).toBe(false);
  });

  it('reads the file of a record saved, edited or damaged since, and forgets one whose directory went', async () => {
    const [one, two, three] = await shutDownCleanly();
    // Saved again (a new file: another inode), edited in place (another size), a third's directory removed.
    repository().save({ ...one!, title: 'one, saved later' });
    const file = (id: string) => path.join(conversationsDir, id, 'conversation.json');
    fs.writeFileSync(file(two!.id), fs.readFileSync(file(two!.id), 'utf8').slice(0, 40));
    fs.rmSync(path.join(conversationsDir, three!.id), { recursive: true });
    const { records, damaged } = await repository().loadAll();
    expect(titles(records)).toEqual({ [one!.id]: 'one, saved later' });
    expect(damaged.map((d) => [d.id, d.error.damage.file])).toEqual([[two!.id, 'conversation.json']]);
    expect(damaged[0]!.error.damage.reason).toMatch(/not valid JSON/);
  });

  it('is ignored when damaged, torn or sealed with another key: the files are read', async () => {
    for (const spoil of [
      (bytes: Buffer) => bytes.fill(0x41, bytes.length >> 1, (bytes.length >> 1) + 8),
      (bytes: Buffer) => bytes.subarray(0, bytes.length - 20),
      (bytes: Buffer) => bytes.subarray(0, 10),
    ]) {
      const held = await shutDownCleanly();
      fs.writeFileSync(snapshotFile, spoil(fs.readFileSync(snapshotFile)));
      const { records, damaged } = await repository().loadAll();
      expect(damaged).toEqual([]);
      for (const r of held) expect(titles(records)[r.id]).toBe(r.title!.replace(' (held)', ''));
      expect(fs.existsSync(snapshotFile)).toBe(false);
      fs.rmSync(conversationsDir, { recursive: true });
    }
    await shutDownCleanly();
    const other = new SecretBox(SecretBox.keyFromText('o'.repeat(64)));
    // Another key cannot open the snapshot (nor the files' secrets: those are quarantined, as today).
    const { records, damaged } = await repository(other).loadAll();
    expect(records).toEqual([]);
    expect(damaged).toHaveLength(3);
  });
});

describe('the summaries of a clean shutdown', () => {
  it('come back as saved and are taken; any entry of the wrong shape makes them untrusted (each log is read)', async () => {
    const { FileSummaryStore } = await import('../src/adapters/file-summary-store.js');
    const file = path.join(dataDir, 'summaries.json');
    const store = new FileSummaryStore(file);
    const saved = new Map([['a', { updated_at: now, event_count: 3 }], ['b', { updated_at: now, event_count: 0 }]]);
    await store.save(saved);
    expect(await store.take()).toEqual(saved);
    expect(fs.existsSync(file)).toBe(false);
    for (const bad of [{ version: 2, summaries: {} }, { version: 1, summaries: { a: { updated_at: now, event_count: -1 } } }, { version: 1, summaries: { a: { updated_at: 5, event_count: 1 } } }, { version: 1, summaries: { a: null } }, 'not json']) {
      fs.writeFileSync(file, typeof bad === 'string' ? bad : JSON.stringify(bad));
      expect(await store.take(), JSON.stringify(bad)).toBeNull();
    }
  });
});
