// A record's save without fsync writes over the file that the previous save replaced (kept by a
// hard link as `conversation.json.spare.tmp`) and renames it over the record (issue 19, P10): at
// every step the record on disk is the old one or the new one, whole; the spare never keeps an
// old record's content (zeros, its size kept); what a save cut short leaves is harmless and
// swept at the next start; without hard links, and with fsync, saves go the usual way.
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FileConversationRepository } from '../src/adapters/file-conversation-repository.js';
import type { ConversationRecord } from '../src/core/conversations/conversation-record.js';
import { SecretBox } from '../src/core/secrets/secret-box.js';
import { tempDir } from './support/agentd.js';
import { storedRecord } from './support/stored-record.js';

let dataDir: string;
let conversationsDir: string;
const box = new SecretBox(SecretBox.keyFromText('k'.repeat(64)));

beforeEach(() => {
  dataDir = tempDir('agentd-record-save-');
  conversationsDir = path.join(dataDir, 'conversations');
});
afterEach(() => {
  vi.restoreAllMocks();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const fileOf = (id: string, name = 'conversation.json') => path.join(conversationsDir, id, name);
const spareOf = (id: string) => fileOf(id, 'conversation.json.spare.tmp');
const inode = (file: string) => fs.statSync(file).ino;
const loadTitles = async (options: { fsync?: boolean } = {}) => {
  const { records, damaged } = await new FileConversationRepository(conversationsDir, box, options).loadAll();
  expect(damaged).toEqual([]);
  return records.map((record) => record.title);
};

describe('saving a record over a spare file', () => {
  it('alternates between two files, the record always whole and the spare blanked, and loads the last save', async () => {
    const repository = new FileConversationRepository(conversationsDir, box);
    const record: ConversationRecord = storedRecord(randomUUID(), { title: 'v0', secrets: { TOKEN: 'first-secret-value-0a1b' } });
    repository.save(record);
    // The first save has nothing to keep: no spare yet.
    expect(fs.existsSync(spareOf(record.id))).toBe(false);
    const first = inode(fileOf(record.id));

    repository.save({ ...record, title: 'v1' });
    // The replaced file is the spare now, its content zeros.
    expect(inode(spareOf(record.id))).toBe(first);
    const spare = fs.readFileSync(spareOf(record.id));
    expect(spare.length).toBeGreaterThan(0);
    expect(spare.every((byte) => byte === 0)).toBe(true);

    // From here each save writes over the spare and swaps: two files in turn, nothing else left.
    const inodes = new Set<number>();
    let sealedBefore = '';
    for (let i = 2; i < 8; i++) {
      const secrets: Record<string, string> = i === 7 ? {} : { TOKEN: `secret-value-${i}` };
      repository.save({ ...record, title: `v${i}`, secrets });
      if (i === 6) sealedBefore = (JSON.parse(fs.readFileSync(fileOf(record.id), 'utf8')) as { secrets: { TOKEN: string } }).secrets.TOKEN;
      inodes.add(inode(fileOf(record.id)));
      expect(JSON.parse(fs.readFileSync(fileOf(record.id), 'utf8')).title).toBe(`v${i}`);
      expect(fs.readFileSync(spareOf(record.id)).every((byte) => byte === 0)).toBe(true);
    }
    expect(inodes.size).toBe(2);
    expect(fs.readdirSync(path.join(conversationsDir, record.id)).sort()).toEqual(['conversation.json', 'conversation.json.spare.tmp']);
    // A shorter record than the spare held: cut to its length (valid JSON, nothing after it).
    repository.save({ ...record, title: 'v8', metadata: {} });
    expect(JSON.parse(fs.readFileSync(fileOf(record.id), 'utf8')).title).toBe('v8');
    expect(await loadTitles()).toEqual(['v8']);
    // The deleted secret's sealed value is in no file any more.
    expect(sealedBefore.length).toBeGreaterThan(10);
    for (const name of fs.readdirSync(path.join(conversationsDir, record.id))) expect(fs.readFileSync(path.join(conversationsDir, record.id, name), 'utf8')).not.toContain(sealedBefore);
  });

  it('after a save cut short (a crash between its steps), the record is whole, and the next saves and start are as usual', async () => {
    const repository = new FileConversationRepository(conversationsDir, box);
    const record: ConversationRecord = storedRecord(randomUUID(), { title: 'v0' });
    repository.save(record);
    repository.save({ ...record, title: 'v1' });
    // As a crash would leave them: the spare half-written with the next record, and the link to the live record still there.
    fs.writeFileSync(spareOf(record.id), '{"id":"half-writ');
    fs.linkSync(fileOf(record.id), fileOf(record.id, 'conversation.json.previous.tmp'));
    expect(await loadTitles()).toEqual(['v1']);

    // A start reads the record, whatever the leftovers hold.
    const restarted = new FileConversationRepository(conversationsDir, box);
    const loaded = await restarted.loadAll();
    expect(loaded.records.map((r) => r.title)).toEqual(['v1']);
    // In-process, the next save uses the leftovers (the stale link replaced) and leaves the usual two files.
    repository.save({ ...record, title: 'v2' });
    expect(JSON.parse(fs.readFileSync(fileOf(record.id), 'utf8')).title).toBe('v2');
    expect(fs.existsSync(fileOf(record.id, 'conversation.json.previous.tmp'))).toBe(false);
    expect(await loadTitles()).toEqual(['v2']);
  });

  it('where hard links are refused, and with fsync, saves replace the record with a new file as before', async () => {
    const record: ConversationRecord = storedRecord(randomUUID(), { title: 'v0' });
    const synced = new FileConversationRepository(conversationsDir, box, { fsync: true });
    for (let i = 0; i < 3; i++) synced.save({ ...record, title: `s${i}` });
    expect(fs.readdirSync(path.join(conversationsDir, record.id))).toEqual(['conversation.json']);
    expect(await loadTitles({ fsync: true })).toEqual(['s2']);

    const link = vi.spyOn(fs, 'linkSync').mockImplementation(() => {
      throw Object.assign(new Error('EPERM: operation not permitted, link'), { code: 'EPERM' });
    });
    const repository = new FileConversationRepository(conversationsDir, box);
    for (let i = 0; i < 3; i++) repository.save({ ...record, title: `n${i}` });
    // Tried once, then never again.
    expect(link).toHaveBeenCalledTimes(1);
    expect(fs.readdirSync(path.join(conversationsDir, record.id))).toEqual(['conversation.json']);
    expect(await loadTitles()).toEqual(['n2']);
  });
});
