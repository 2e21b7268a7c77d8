// The records snapshot of a clean shutdown (issue 19, P4): the starts after it take each record
// from it while the record's file is as the snapshot saw it (its stamp: inode, size, mtime, ctime),
// and read the file otherwise; and each log's summary while the log file is unchanged. The start
// right after it (the token its summaries.json names) takes every record and summary as it is. What
// changed, went or was damaged since is read from its file (changed, gone, quarantined as today);
// a damaged snapshot, or one sealed with another key, is ignored and removed, and so is the snapshot at
// the first DELETE (the deleted record must not stay on disk); otherwise the snapshot is kept
// at start-up (a cache checked entry by entry, so a crash later still uses what it holds of
// unchanged files); no secret is in it in clear.
import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FileConversationRepository } from '../../src/adapters/files/file-conversation-repository.js';
import type { ConversationRecord, LoadedConversations } from '../../src/core/conversations/conversation-record.js';
import type { ConversationSummary } from '../../src/core/conversations/summary-store.js';
import { SecretBox } from '../../src/core/secrets/secret-box.js';
import { normalizeLlmConfig } from '../../src/core/schemas/llm-config.js';
import { tempDir } from '../support/agentd.js';
import { storedRecord } from '../support/stored-record.js';

let dataDir: string;
let conversationsDir: string;
let snapshotFile: string;
const box = new SecretBox(SecretBox.keyFromText('k'.repeat(64)));
const now = '2026-11-23T01:00:00.000Z';

function record(title: string, secret: string): ConversationRecord {
  return storedRecord(randomUUID(), { title, tools: ['bash', 'glob'], secrets: { TOKEN: secret } });
}

const repository = (key = box, workdirBase?: string) => new FileConversationRepository(conversationsDir, key, { snapshotFile, ...(workdirBase !== undefined && { workdirBase }) });
const titles = (records: readonly ConversationRecord[]) => Object.fromEntries(records.map((r) => [r.id, r.title]));

beforeEach(() => {
  dataDir = tempDir('agentd-snapshot-');
  conversationsDir = path.join(dataDir, 'conversations');
  snapshotFile = path.join(dataDir, 'conversations.snapshot');
});
afterEach(() => fs.rmSync(dataDir, { recursive: true, force: true }));

/** The snapshot's parts (iv | stamps' byte length | stamps in clear | sealed lines | tag): the stamps, and the lines' text. */
function openSnapshot(bytes: Buffer): { stamps: Float64Array; text: string } {
  const stampBytes = bytes.readUInt32LE(12);
  const clear = bytes.subarray(12, 16 + stampBytes);
  const opening = box.opening(bytes.subarray(0, 12), bytes.subarray(bytes.length - 16), clear);
  const text = Buffer.concat([opening.update(bytes.subarray(16 + stampBytes, bytes.length - 16)), opening.final()]).toString('utf8');
  return { stamps: new Float64Array(Uint8Array.from(clear.subarray(4)).buffer), text };
}

/** A loaded conversation's summary from the snapshot (summaryAt takes its place among the records). */
function summaryIn(loaded: LoadedConversations, id: string): ConversationSummary | undefined {
  const at = loaded.records.findIndex((record) => record.id === id);
  expect(at).toBeGreaterThanOrEqual(0);
  return loaded.summaryAt!(at);
}

/** Three records saved to their files, then held in memory with a title the files do not have (as usage or updated_at are held). */
async function shutDownCleanly(): Promise<ConversationRecord[]> {
  const records = [record('one', 'secret-value-one-4f2a'), record('two', 'secret-value-two-9c1b'), record('three', 'secret-value-three-77d0')];
  const repo = repository();
  for (const r of records) repo.save(r);
  const held = records.map((r) => ({ ...r, title: `${r.title} (held)` }));
  await repo.saveSnapshot(held, new Map());
  return held;
}

describe('the records snapshot of a clean shutdown', () => {
  it('gives each record whose file is unchanged, as it was held, and is kept: a start after a crash takes them again', async () => {
    const held = await shutDownCleanly();
    expect(fs.existsSync(snapshotFile)).toBe(true);
    const { records, damaged } = await repository().loadAll({ afterCleanStop: true });
    expect(damaged).toEqual([]);
    // The titles held in memory, not the files': these came from the snapshot.
    expect(titles(records)).toEqual(titles(held));
    expect(records.find((r) => r.title === 'one (held)')!.secrets).toEqual({ TOKEN: 'secret-value-one-4f2a' });
    // Kept: a start after a crash (no clean shutdown since) takes the unchanged records from it too.
    expect(fs.existsSync(snapshotFile)).toBe(true);
    const again = await repository().loadAll();
    expect(titles(again.records)).toEqual(titles(held));
  });

  it('of many records (lines across its 64 KiB pieces, characters of several bytes included) gives each back, in created_at order whatever order they were held in', async () => {
    const repo = repository();
    const created = (i: number) => new Date(Date.parse(now) + i * 1000).toISOString();
    // ~1.5 KB a line: the snapshot spans several pieces, and lines and characters straddle their ends.
    // Half with an LLM config (kept without its unset fields, given back with them), half without.
    const llm = (i: number) => (i % 2 === 0 ? null : normalizeLlmConfig({ model: `model-${i % 3}`, api_key: `sk-${i}`, temperature: i % 5 === 0 ? 0 : 0.5, extra_body: { n: i } }));
    const held = Array.from({ length: 400 }, (_, i) => storedRecord(randomUUID(), { title: `${i} ${'é—✓'.repeat(200 + (i % 7))}`, llm: llm(i), created_at: created(i), updated_at: created(i), secrets: { TOKEN: `secret-${i}` } }));
    for (const r of held) repo.save(r);
    const shuffled = [...held].sort((a, b) => (a.id < b.id ? -1 : 1));
    await repo.saveSnapshot(shuffled, new Map());
    expect(fs.statSync(snapshotFile).size).toBeGreaterThan(8 * 64 * 1024);
    const { records, damaged } = await repository().loadAll({ afterCleanStop: true });
    expect(damaged).toEqual([]);
    expect(records.map((r) => r.id)).toEqual(held.map((r) => r.id));
    expect(records).toEqual(held);
    expect(records[1]!.llm).toMatchObject({ model: 'model-1', api_key: 'sk-1', temperature: 0.5, top_p: null, extra_body: { n: 1 } });
    expect(records[5]!.llm!.temperature, 'a zero is a value, not an unset field').toBe(0);
    // The unset fields themselves are not in it: a third less to decrypt and parse at a start.
    const { text } = openSnapshot(fs.readFileSync(snapshotFile));
    expect(text).toContain('"temperature":0.5');
    expect(text).not.toContain('"top_p":null');
  });

  it('of 1,500 records: their stamps (longer than a 64 KiB piece, in clear) are checked after a crash, and a line longer than three pieces is read whole', async () => {
    const repo = repository();
    const created = (i: number) => new Date(Date.parse(now) + i * 1000).toISOString();
    const held = Array.from({ length: 1_500 }, (_, i) => storedRecord(randomUUID(), { created_at: created(i), updated_at: created(i), ...(i === 700 && { metadata: { notes: 'n'.repeat(150_000) } }) }));
    for (const r of held) repo.save(r);
    await repo.saveSnapshot(held, new Map());
    const { stamps, text } = openSnapshot(fs.readFileSync(snapshotFile));
    expect(stamps.length * 8).toBeGreaterThan(64 * 1024);
    // Each record's file stamp (inode, size, mtime, ctime) first among its nine numbers.
    const stat = fs.statSync(path.join(conversationsDir, held[1_499]!.id, 'conversation.json'));
    expect([...stamps.subarray(1_499 * 9, 1_499 * 9 + 4)]).toEqual([stat.ino, stat.size, stat.mtimeMs, stat.ctimeMs]);
    expect(Math.max(...text.split('\n').map((line) => line.length))).toBeGreaterThan(2 * 64 * 1024);
    const readdir = vi.spyOn(fs.promises, 'readdir');
    const readFile = vi.spyOn(fs, 'readFile');
    try {
      const { records, damaged } = await repository().loadAll({ afterCleanStop: true });
      expect(damaged).toEqual([]);
      expect(records).toEqual(held);
      // Every record taken from the snapshot (no directory listed, no record file read).
      expect(readdir).not.toHaveBeenCalled();
      // After a crash: each file's stamp checked against the snapshot's, and none read (all unchanged).
      const afterCrash = await repository().loadAll({ afterCleanStop: false, snapshotToken: 'another-token' });
      expect(afterCrash.records).toEqual(held);
      expect(readFile).not.toHaveBeenCalled();
    } finally {
      readdir.mockRestore();
      readFile.mockRestore();
    }
  });

  it('reads the file of a record rewritten in place with its size and mtime kept (a restored copy): its ctime says so', async () => {
    const one = record('one', 'secret-value-one-4f2a');
    const repo = repository();
    repo.save(one);
    const file = path.join(conversationsDir, one.id, 'conversation.json');
    // A whole-second mtime, which a copy can put back exactly.
    const mtime = new Date('2026-01-02T03:04:05.000Z');
    fs.utimesSync(file, mtime, mtime);
    await repo.saveSnapshot([one], new Map());
    const before = fs.statSync(file);
    const text = fs.readFileSync(file, 'utf8');
    const edited = text.replace('"title":"one"', '"title":"eno"');
    expect(edited).not.toBe(text);
    // The same inode and size, the old mtime put back; only the kernel's ctime moves (once its clock has ticked).
    do {
      await new Promise((resolve) => setTimeout(resolve, 5));
      fs.writeFileSync(file, edited);
      fs.utimesSync(file, mtime, mtime);
    } while (fs.statSync(file).ctimeMs === before.ctimeMs);
    const after = fs.statSync(file);
    expect([after.ino, after.size, after.mtimeMs]).toEqual([before.ino, before.size, before.mtimeMs]);
    const { records } = await repository().loadAll();
    expect(titles(records)[one.id]).toBe('eno');
  });

  it('keeps each log\'s event count, usable while the log file is unchanged (after a crash too)', async () => {
    const [one, two, three] = [record('one', 's-1'), record('two', 's-2'), record('three', 's-3')];
    const repo = repository();
    for (const r of [one, two, three]) repo.save(r!);
    const log = (id: string) => path.join(conversationsDir, id, 'events.jsonl');
    fs.writeFileSync(log(one!.id), '{"seq":1}\n{"seq":2}\n');
    fs.writeFileSync(log(two!.id), '{"seq":1}\n');
    await repo.saveSnapshot([one!, two!, three!], new Map([[one!.id, { updated_at: now, event_count: 2 }], [two!.id, { updated_at: now, event_count: 1 }]]));
    // Appended to since (a server that crashed later): its summary is no longer the snapshot's.
    fs.appendFileSync(log(two!.id), '{"seq":2}\n');
    const loaded = await repository().loadAll();
    expect(loaded.records).toHaveLength(3);
    const summaryOf = (id: string) => summaryIn(loaded, id);
    expect(summaryOf(one!.id)).toEqual({ updated_at: one!.updated_at, event_count: 2 });
    expect(summaryOf(two!.id)).toBeUndefined();
    // No log when the snapshot was written.
    expect(summaryOf(three!.id)).toBeUndefined();
  });

  it('gives each log\'s summary without a look at the log right after the clean shutdown that wrote it (its token, named by summaries.json); with another token, as after a crash', async () => {
    const [one, two] = [record('one', 's-1'), record('two', 's-2')];
    const repo = repository();
    for (const r of [one, two]) repo.save(r!);
    const log = (id: string) => path.join(conversationsDir, id, 'events.jsonl');
    fs.writeFileSync(log(one!.id), '{"seq":1}\n{"seq":2}\n');
    fs.writeFileSync(log(two!.id), '{"seq":1}\n');
    const token = await repo.saveSnapshot([one!, two!], new Map([[one!.id, { updated_at: now, event_count: 2 }], [two!.id, { updated_at: now, event_count: 1 }]]));
    expect(token).toEqual(expect.any(String));
    // Its stamp changed (touched by a backup tool, say): with the token, the log is not looked at.
    const later = new Date(Date.now() + 60_000);
    fs.utimesSync(log(two!.id), later, later);
    const current = await repository().loadAll({ afterCleanStop: true, snapshotToken: token });
    expect([summaryIn(current, one!.id), summaryIn(current, two!.id)]).toEqual([{ updated_at: one!.updated_at, event_count: 2 }, { updated_at: two!.updated_at, event_count: 1 }]);
    // The token of another save (summaries.json of an earlier shutdown): each log's stamp is checked.
    const other = await repository().loadAll({ afterCleanStop: true, snapshotToken: 'another-token' });
    expect([summaryIn(other, one!.id), summaryIn(other, two!.id)]).toEqual([{ updated_at: one!.updated_at, event_count: 2 }, undefined]);
    // Each save has its own token.
    expect(await repository().saveSnapshot([one!, two!], new Map())).not.toBe(token);
  });

  it('right after the clean shutdown that wrote it (its token), gives every record without a look at its file; with another token (after a crash), each file\'s stamp is checked', async () => {
    const [one, two, three] = [record('one', 's-1'), record('two', 's-2'), record('three', 's-3')];
    const repo = repository();
    for (const r of [one, two, three]) repo.save(r!);
    const held = [one, two, three].map((r) => ({ ...r!, title: `${r!.title} (held)` }));
    const token = (await repo.saveSnapshot(held, new Map()))!;
    // A file changed behind the server's back: edited in place (another size, mtime and ctime).
    const file = path.join(conversationsDir, two!.id, 'conversation.json');
    fs.writeFileSync(file, fs.readFileSync(file, 'utf8').replace('"title":"two"', '"title":"edited"'));
    const statSync = vi.spyOn(fs, 'statSync');
    try {
      const recordStats = () => statSync.mock.calls.filter(([file]) => String(file).endsWith('conversation.json')).length;
      const current = await repository().loadAll({ afterCleanStop: true, snapshotToken: token });
      expect(titles(current.records)).toEqual(titles(held));
      expect(current.rightAfterCleanStop).toBe(true);
      expect(recordStats(), 'no record file looked at').toBe(0);
      const afterCrash = await repository().loadAll({ afterCleanStop: false, snapshotToken: 'another-token' });
      expect(titles(afterCrash.records)).toEqual({ ...titles(held), [two!.id]: 'edited' });
      expect(recordStats()).toBe(3);
    } finally {
      statSync.mockRestore();
    }
  });

  it('goes with the first DELETE (it holds the deleted record and its secrets, sealed); the next clean shutdown writes a new one', async () => {
    const held = await shutDownCleanly();
    const repo = repository();
    await repo.loadAll({ afterCleanStop: true });
    expect(fs.existsSync(snapshotFile)).toBe(true);
    await repo.remove(held[0]!.id);
    expect(fs.existsSync(snapshotFile)).toBe(false);
    // A start after a crash now reads the files: the deleted record is gone, the others as saved.
    const afterCrash = await repository().loadAll();
    expect(afterCrash.records.map((r) => r.title).sort()).toEqual(['three', 'two']);
    await repo.saveSnapshot(held.slice(1), new Map());
    expect(fs.existsSync(snapshotFile)).toBe(true);
    await repo.remove(held[1]!.id);
    expect(fs.existsSync(snapshotFile)).toBe(false);
  });

  it('writes 0 for what most records hold alike (the previous line\'s tools, a usage of zeros, no pending actions) and gives each record back as it was held', async () => {
    const at = (i: number) => `2026-11-23T01:00:0${i}.000Z`;
    const zeros = () => ({ prompt_tokens: 0, completion_tokens: 0, cost: 0, cached_tokens: 0, reasoning_tokens: 0 });
    const pending = [{ tool_call_id: 'call-1', tool_name: 'bash', args: { command: 'ls' } }];
    const held = [
      storedRecord(randomUUID(), { title: 'a', tools: ['bash', 'glob'], usage: zeros(), created_at: at(1) }),
      storedRecord(randomUUID(), { title: 'b', tools: ['bash', 'glob'], usage: { ...zeros(), prompt_tokens: 12, cost: 0.5 }, created_at: at(2) }),
      // A usage of an older shape (no cached or reasoning tokens) stays as it is.
      storedRecord(randomUUID(), { title: 'c', tools: ['bash'], usage: { prompt_tokens: 0, completion_tokens: 0, cost: 0 }, pending_actions: pending, created_at: at(3) }),
      storedRecord(randomUUID(), { title: 'd', tools: ['bash'], usage: zeros(), created_at: at(4) }),
    ];
    const repo = repository();
    for (const r of held) repo.save(r);
    await repo.saveSnapshot(held, new Map());

    const { text } = openSnapshot(fs.readFileSync(snapshotFile));
    const lines = text.trimEnd().split('\n').slice(1).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.map((line) => [line.title, line.tools, line.usage, line.pending_actions])).toEqual([
      ['a', ['bash', 'glob'], 0, 0],
      ['b', 0, { ...zeros(), prompt_tokens: 12, cost: 0.5 }, 0],
      ['c', ['bash'], { prompt_tokens: 0, completion_tokens: 0, cost: 0 }, pending],
      ['d', 0, 0, 0],
    ]);
    // Each field where the record has it.
    expect(Object.keys(lines[3]!)).toEqual(Object.keys(held[3]!));

    const { records } = await repository().loadAll({ afterCleanStop: true });
    expect(records).toEqual(held);
    for (const [i, r] of records.entries()) expect(Object.keys(r.usage), r.title ?? '').toEqual(Object.keys(held[i]!.usage));
    // Given their own: a change to one is not another's.
    records[0]!.pending_actions.push(pending[0] as never);
    expect(records[3]!.pending_actions).toEqual([]);
    records[0]!.usage.prompt_tokens += 1;
    expect(records[3]!.usage.prompt_tokens).toBe(0);
  });

  it('writes 0 for a workdir in the server\'s workdir base (`<base>/<id>`, the base in its first line), which a server with another base gives back as it was', async () => {
    const base = path.join(dataDir, 'workspaces');
    const at = (i: number) => `2026-11-23T01:00:0${i}.000Z`;
    const ids = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    // The third is named after another conversation's id: not `<base>/<its id>`, kept in full.
    const workdirs = [path.join(base, ids[0]!), '/srv/project', path.join(base, ids[0]!), path.join(base, ids[3]!)];
    const held = ids.map((id, i) => storedRecord(id, { title: String(i), workdir: workdirs[i], created_at: at(i) }));
    const repo = repository(box, base);
    for (const r of held) repo.save(r);
    await repo.saveSnapshot(held, new Map());
    const [first, ...lines] = openSnapshot(fs.readFileSync(snapshotFile)).text.trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    expect((first as unknown as unknown[])[3]).toBe(base);
    expect(lines.map((line) => line.workdir)).toEqual([0, '/srv/project', path.join(base, ids[0]!), 0]);
    const { records } = await repository(box, '/another/base').loadAll({ afterCleanStop: true });
    expect(records).toEqual(held);
    expect(records[3]!.workdir).toBe(path.join(base, ids[3]!));
    // A server that names no base writes every workdir in full.
    await repository().saveSnapshot(held, new Map());
    const plain = openSnapshot(fs.readFileSync(snapshotFile)).text.trimEnd().split('\n').slice(1);
    expect(plain.map((line) => (JSON.parse(line) as { workdir: string }).workdir)).toEqual(held.map((r) => r.workdir));
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

  it('spares listing the conversations directory while it is unchanged since; one added since (a start after a crash) is listed and read', async () => {
    const held = await shutDownCleanly();
    const readdir = vi.spyOn(fs.promises, 'readdir');
    try {
      const listings = () => readdir.mock.calls.filter(([dir]) => dir === conversationsDir).length;
      const unchanged = await repository().loadAll({ afterCleanStop: true });
      expect(titles(unchanged.records)).toEqual(titles(held));
      expect(listings(), 'not listed: the snapshot names every directory in it').toBe(0);
      // A conversation created after the snapshot, and the server killed before a clean shutdown.
      const later = record('four', 'secret-value-four-1e0c');
      repository().save(later);
      const afterCrash = await repository().loadAll();
      expect(titles(afterCrash.records)).toEqual({ ...titles(held), [later.id]: 'four' });
      expect(listings()).toBe(1);
    } finally {
      readdir.mockRestore();
    }
  });

  it('lists the directory at the next start when it holds a directory that none of its records names (a quarantined conversation\'s): it is read and quarantined again', async () => {
    const [one, two] = [record('one', 's-1'), record('two', 's-2')];
    const repo = repository();
    for (const r of [one, two]) repo.save(r!);
    fs.writeFileSync(path.join(conversationsDir, two!.id, 'conversation.json'), '{ damaged');
    // The store holds only the conversations that are not quarantined: the snapshot of the shutdown has one.
    await repo.saveSnapshot([one!], new Map());
    for (const start of [1, 2]) {
      const { records, damaged } = await repository().loadAll({ afterCleanStop: true });
      expect(titles(records), `start ${start}`).toEqual({ [one!.id]: 'one' });
      expect(damaged.map((d) => d.id), `start ${start}`).toEqual([two!.id]);
    }
  });

  it('is ignored when damaged, torn or sealed with another key: the files are read, the snapshot removed', async () => {
    for (const spoil of [
      (bytes: Buffer) => bytes.fill(0x41, bytes.length >> 1, (bytes.length >> 1) + 8),
      // The stamps are in clear, and authenticated all the same: one changed, or their length.
      (bytes: Buffer) => (bytes.writeUInt8(bytes.readUInt8(16 + 9 * 8 + 1) ^ 1, 16 + 9 * 8 + 1), bytes),
      (bytes: Buffer) => (bytes.writeUInt32LE(bytes.readUInt32LE(12) - 72, 12), bytes),
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
  it('with fsync (AGENTD_FSYNC), are gone on disk once taken: the data dir is synced after the removal', async () => {
    const { FileSummaryStore } = await import('../../src/adapters/files/file-summary-store.js');
    const file = path.join(dataDir, 'summaries.json');
    await new FileSummaryStore(file).save(new Map(), { inSnapshot: 'token-1' });
    const fsyncSync = vi.spyOn(fs, 'fsyncSync');
    const openSync = vi.spyOn(fs, 'openSync');
    try {
      expect(await new FileSummaryStore(file).take()).toEqual({ inSnapshot: 'token-1' });
      expect(fsyncSync).not.toHaveBeenCalled();
      await new FileSummaryStore(file).save(new Map(), { inSnapshot: 'token-2' });
      expect(await new FileSummaryStore(file, { fsync: true }).take()).toEqual({ inSnapshot: 'token-2' });
      expect(fs.existsSync(file)).toBe(false);
      const dirFd = openSync.mock.results.find((result, i) => openSync.mock.calls[i]![0] === dataDir)?.value;
      expect(dirFd, 'the data dir opened').toEqual(expect.any(Number));
      expect(fsyncSync).toHaveBeenCalledWith(dirFd);
    } finally {
      fsyncSync.mockRestore();
      openSync.mockRestore();
    }
  });

  it('come back as saved and are taken; any entry of the wrong shape makes them untrusted (each log is read)', async () => {
    const { FileSummaryStore } = await import('../../src/adapters/files/file-summary-store.js');
    const file = path.join(dataDir, 'summaries.json');
    const store = new FileSummaryStore(file);
    const saved = new Map([['a', { updated_at: now, event_count: 3 }], ['b', { updated_at: now, event_count: 0 }]]);
    await store.save(saved);
    expect(await store.take()).toEqual(saved);
    // With the usage held at the stop (a run end may have left the record's file behind it).
    const withUsage = new Map([['a', { updated_at: now, event_count: 3, usage: { prompt_tokens: 5, completion_tokens: 2, cost: 0.5, cached_tokens: 1, reasoning_tokens: 0 } }]]);
    await store.save(withUsage);
    expect(await store.take()).toEqual(withUsage);
    expect(fs.existsSync(file)).toBe(false);
    // Held by the records snapshot saved with them: only its token is saved (a few bytes instead of ~100 per conversation).
    await store.save(saved, { inSnapshot: 'token-1' });
    expect(fs.readFileSync(file, 'utf8')).toBe('{"version":2,"snapshot":"token-1"}');
    expect(await store.take()).toEqual({ inSnapshot: 'token-1' });
    expect(fs.existsSync(file)).toBe(false);
    for (const bad of [{ version: 2, summaries: {} }, { version: 2, snapshot: 5 }, { version: 3, snapshot: 'token-1' }, { version: 1, summaries: { a: { updated_at: now, event_count: -1 } } }, { version: 1, summaries: { a: { updated_at: 5, event_count: 1 } } }, { version: 1, summaries: { a: null } }, { version: 1, summaries: { a: { updated_at: now, event_count: 1, usage: { prompt_tokens: -1, completion_tokens: 0, cost: 0 } } } }, { version: 1, summaries: { a: { updated_at: now, event_count: 1, usage: 'x' } } }, 'not json']) {
      fs.writeFileSync(file, typeof bad === 'string' ? bad : JSON.stringify(bad));
      expect(await store.take(), JSON.stringify(bad)).toBeNull();
    }
  });
});
