import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileEventLog } from '../../src/adapters/files/event-log/file-event-log.js';
import type { NewEvent } from '../../src/core/schemas/event.js';
import { DamagedDataError } from '../../src/core/errors.js';
import { tempDir } from '../support/agentd.js';
import { openFilesWith } from '../support/open-files.js';

let dir: string;
let now: number;
const logs: FileEventLog[] = [];

function openLog(options: { maxOpen?: number; idleCloseMs?: number } = {}): FileEventLog {
  const log = new FileEventLog({ conversationsDir: path.join(dir, 'conversations'), firehoseFile: path.join(dir, 'firehose.idx'), clock: { now: () => now }, ...options });
  logs.push(log);
  return log;
}

async function close(log: FileEventLog): Promise<void> {
  await log.close();
  logs.splice(logs.indexOf(log), 1);
}

const message = (content: string): NewEvent => ({ kind: 'message', source: 'user', role: 'user', content });
const status = (): NewEvent => ({ kind: 'state_update', source: 'system', status: 'running' });
const all = async (log: FileEventLog, id: string) => (await log.read(id, { order: 'asc', limit: 1_000_000 }));
const logFile = (id: string) => path.join(dir, 'conversations', id, 'events.jsonl');
const indexFile = (id: string) => path.join(dir, 'conversations', id, 'events.idx');
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

async function fill(log: FileEventLog, id: string, n: number, stepMs = 1): Promise<void> {
  for (let i = 1; i <= n; i++) {
    (await log.append(id, i % 3 === 0 ? status() : message(`event ${i} ${'é'.repeat(i % 5)}`)));
    now += stepMs;
  }
}

beforeEach(() => {
  dir = tempDir('agentd-log-');
  now = Date.parse('2026-01-01T00:00:00.000Z');
});
afterEach(async () => {
  for (const log of logs.splice(0)) await log.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('FileEventLog appends', () => {
  it('numbers each conversation 1..N with no gaps, and stores exactly the returned JSON', async () => {
    const log = openLog();
    const [a, b] = [randomUUID(), randomUUID()];
    const appended = [];
    for (let i = 0; i < 60; i++) appended.push((await log.append(i % 4 === 0 ? b : a, message(`m${i}`))));
    expect(appended.filter((x) => x.event.conversation_id === a).map((x) => x.event.seq)).toEqual(range(1, 45));
    expect(appended.filter((x) => x.event.conversation_id === b).map((x) => x.event.seq)).toEqual(range(1, 15));
    expect(appended.map((x) => x.globalCursor)).toEqual(range(1, 60));
    for (const x of appended) expect(JSON.parse(x.json)).toEqual(x.event);
    expect((await all(log, a)).map((stored) => stored.json)).toEqual(appended.filter((x) => x.event.conversation_id === a).map((x) => x.json));
    expect(fs.readFileSync(logFile(a), 'utf8')).toBe((await all(log, a)).map((stored) => `${stored.json}\n`).join(''));
    expect((await log.lastSeq(a))).toBe(45);
    expect((await log.lastSeq(randomUUID()))).toBe(0);
  });

  it('writes index entries 128 at a time: those not yet written are read from memory, and a crash leaves the log to make them again', async () => {
    const log = openLog();
    const id = randomUUID();
    await fill(log, id, 200);
    // One write of the index for 128 appends; the last 72 entries are held.
    expect(fs.statSync(indexFile(id)).size).toBe(128 * 32);
    const lines = fs.readFileSync(logFile(id), 'utf8').split('\n').slice(0, -1);
    expect((await all(log, id)).map((stored) => stored.json)).toEqual(lines);
    // Pages across the boundary, either way, with and without a kind, and by id.
    expect((await log.read(id, { order: 'asc', afterSeq: 120, limit: 20 })).map((s) => s.event.seq)).toEqual(range(121, 140));
    expect((await log.read(id, { order: 'desc', cursorSeq: 135, limit: 10 })).map((s) => s.event.seq)).toEqual(range(125, 134).reverse());
    expect((await log.read(id, { order: 'desc', limit: 5, kinds: ['state_update'] })).map((s) => s.event.seq)).toEqual([198, 195, 192, 189, 186]);
    expect((await log.count(id, { kinds: ['state_update'], afterSeq: 120 }))).toBe(26);
    // A second log on the same files, the first never closed: what a kill -9 leaves to the next process.
    const next = openLog();
    expect((await all(next, id)).map((stored) => stored.json)).toEqual(lines);
    expect(fs.statSync(indexFile(id)).size).toBe(200 * 32);
    expect((await next.read(id, { order: 'desc', limit: 5, kinds: ['state_update'] })).map((s) => s.event.seq)).toEqual([198, 195, 192, 189, 186]);
    await close(next);
    // A clean close writes what it holds.
    const other = randomUUID();
    const closing = openLog();
    await fill(closing, other, 10);
    expect(fs.statSync(indexFile(other)).size).toBe(0);
    await close(closing);
    expect(fs.statSync(indexFile(other)).size).toBe(10 * 32);
  });

  it("holds each open conversation's unwritten index entries in a buffer of their own, not in a slice of a pool that then stays alive with it", async () => {
    // Node 24's pool for small buffers (Buffer.poolSize) is 64 KiB: a 4 KiB batch sliced from it kept all of it, per open conversation.
    const poolSize = Buffer.poolSize;
    Buffer.poolSize = 64 * 1024;
    try {
      const log = openLog();
      const ids = [randomUUID(), randomUUID(), randomUUID()];
      for (const id of ids) await fill(log, id, 3);
      const open = (log as unknown as { open: Map<string, { pending: Buffer | null }> }).open;
      for (const id of ids) {
        const pending = open.get(id)?.pending;
        expect(pending?.length).toBe(128 * 32);
        expect(pending?.buffer.byteLength).toBe(128 * 32);
      }
    } finally {
      Buffer.poolSize = poolSize;
    }
  });

  it('never lets timestamps go backwards, even when the clock does', async () => {
    const log = openLog();
    const id = randomUUID();
    (await log.append(id, message('a')));
    now -= 60_000;
    const second = (await log.append(id, message('b')));
    expect(second.event.timestamp).toBe('2026-01-01T00:00:00.000Z');
  });

  it('reopens to identical lines, also when only a few files may be open at once', async () => {
    const log = openLog({ maxOpen: 2 });
    const ids = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    for (let i = 0; i < 200; i++) (await log.append(ids[i % 4]!, message(`m${i}`)));
    const before = await Promise.all(ids.map(async (id) => (await all(log, id)).map((stored) => stored.json)));
    expect(before.map((lines) => lines.length)).toEqual([50, 50, 50, 50]);
    const globalBefore = (await log.readGlobal(0, 1000)).map((entry) => entry.stored.json);
    (await close(log));
    const reopened = openLog();
    expect(await Promise.all(ids.map(async (id) => (await all(reopened, id)).map((stored) => stored.json)))).toEqual(before);
    expect((await reopened.readGlobal(0, 1000)).map((entry) => entry.stored.json)).toEqual(globalBefore);
    expect((await reopened.append(ids[0]!, message('next'))).event.seq).toBe(51);
    expect((await reopened.append(ids[0]!, message('next'))).globalCursor).toBe(202);
  });
});

describe('FileEventLog recovery on open', () => {
  let id: string;
  let lines: string[];

  beforeEach(async () => {
    id = randomUUID();
    const log = openLog();
    (await fill(log, id, 40));
    lines = (await all(log, id)).map((stored) => stored.json);
    (await close(log));
  });

  async function reopenAndCheck(expectedCount: number): Promise<FileEventLog> {
    const log = openLog();
    expect((await log.lastSeq(id))).toBe(expectedCount);
    expect((await all(log, id)).map((stored) => stored.json)).toEqual(lines.slice(0, expectedCount));
    expect(fs.statSync(indexFile(id)).size).toBe(expectedCount * 32);
    expect(fs.readFileSync(logFile(id), 'utf8')).toBe(lines.slice(0, expectedCount).map((line) => `${line}\n`).join(''));
    const next = (await log.append(id, message('after recovery')));
    expect(next.event.seq).toBe(expectedCount + 1);
    expect((await all(log, id)).map((stored) => stored.event.seq)).toEqual(range(1, expectedCount + 1));
    (await close(log));
    expect((await all(openLog(), id)).at(-1)!.json).toBe(next.json);
    return log;
  }

  it('drops a torn last line (garbage without a newline)', async () => {
    fs.appendFileSync(logFile(id), '{"id":"torn","seq":41,"kind":"mess');
    (await reopenAndCheck(40));
  });

  it('drops a last line cut in the middle (and the index entry that pointed past the end)', async () => {
    fs.truncateSync(logFile(id), fs.statSync(logFile(id)).size - 10);
    (await reopenAndCheck(39));
  });

  it('drops a complete last line that is not an event', async () => {
    fs.appendFileSync(logFile(id), 'not json\n');
    (await reopenAndCheck(40));
  });

  it('trims an index that is ahead of the log', async () => {
    const cut = lines.slice(0, 25).reduce((size, line) => size + Buffer.byteLength(line) + 1, 0);
    fs.truncateSync(logFile(id), cut);
    (await reopenAndCheck(25));
  });

  it.each([
    ['missing', () => fs.rmSync(indexFile(id))],
    ['behind the log', () => fs.truncateSync(indexFile(id), 10 * 32)],
    ['ending in a partial entry', () => fs.truncateSync(indexFile(id), 30 * 32 + 7)],
    ['empty', () => fs.truncateSync(indexFile(id), 0)],
  ])('rebuilds an index that is %s', async (_name, damage) => {
    damage();
    (await reopenAndCheck(40));
  });

  it('indexes a line the crash left unindexed, then drops a torn one after it', async () => {
    fs.truncateSync(indexFile(id), 39 * 32);
    fs.appendFileSync(logFile(id), '{"partial');
    (await reopenAndCheck(40));
  });

  it('rebuilds index entries that disagree with the log', async () => {
    const index = fs.readFileSync(indexFile(id));
    index.fill(0, 12 * 32, 14 * 32);
    fs.writeFileSync(indexFile(id), index);
    (await reopenAndCheck(40));
  });

  /** Opening fails with DamagedDataError naming the line, and leaves both files exactly as they were. */
  async function expectDamaged(line: number, reason: RegExp): Promise<void> {
    const before = [fs.readFileSync(logFile(id)), fs.readFileSync(indexFile(id))];
    const log = openLog();
    let thrown: unknown;
    try {
      (await log.lastSeq(id));
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(DamagedDataError);
    expect((thrown as DamagedDataError).damage).toMatchObject({ file: 'events.jsonl', line, reason: expect.stringMatching(reason) });
    await expect(log.append(id, message('must not land'))).rejects.toThrow(DamagedDataError);
    expect([fs.readFileSync(logFile(id)), fs.readFileSync(indexFile(id))]).toEqual(before);
  }

  it('refuses a log damaged in the middle, naming the line, and writes nothing', async () => {
    const text = lines.map((line) => `${line}\n`);
    text[9] = `ror":false${text[9]!.slice(10)}`;
    fs.writeFileSync(logFile(id), text.join(''));
    await expectDamaged(10, /not a complete JSON event/);
  });

  it('refuses a bad unindexed line that good lines follow (not a torn tail: nothing is cut off)', async () => {
    fs.truncateSync(indexFile(id), 30 * 32);
    const text = lines.map((line) => `${line}\n`);
    text[34] = `{"torn"}\n`;
    fs.writeFileSync(logFile(id), text.join(''));
    await expectDamaged(35, /not valid JSON|seq/);
  });

  it('refuses two events with the same seq (two writers on one log)', async () => {
    fs.truncateSync(indexFile(id), 20 * 32);
    const text = lines.slice(0, 22).map((line) => `${line}\n`);
    text.push(text[21]!, ...lines.slice(22).map((line) => `${line}\n`));
    fs.writeFileSync(logFile(id), text.join(''));
    await expectDamaged(23, /seq 22 where 23 was expected/);
  });

  it('trims a partial firehose record', async () => {
    fs.appendFileSync(path.join(dir, 'firehose.idx'), Buffer.alloc(7, 1));
    const log = openLog();
    expect(await log.globalHead()).toBe(40);
    expect((await log.append(id, message('x'))).globalCursor).toBe(41);
  });
});

describe('FileEventLog reads', () => {
  let log: FileEventLog;
  let id: string;
  let start: number;

  beforeEach(async () => {
    log = openLog();
    id = randomUUID();
    start = now;
    (await fill(log, id, 300, 1000));
  });

  it('finds events by id, only in their own conversation', async () => {
    const events = (await all(log, id));
    for (const seq of [1, 2, 150, 299, 300]) expect((await log.findById(id, events[seq - 1]!.event.id))).toEqual(events[seq - 1]);
    expect((await log.findById(id, randomUUID()))).toBeUndefined();
    const other = randomUUID();
    const foreign = (await log.append(other, message('elsewhere')));
    expect((await log.findById(id, foreign.event.id))).toBeUndefined();
    expect((await log.findById(other, foreign.event.id))?.json).toBe(foreign.json);
  });

  it('finds `since` by timestamp (at or after), with filters and counts', async () => {
    const at = (seq: number) => start + (seq - 1) * 1000;
    expect((await log.read(id, { order: 'asc', sinceMs: at(101), limit: 3 })).map((s) => s.event.seq)).toEqual([101, 102, 103]);
    expect((await log.read(id, { order: 'asc', sinceMs: at(101) - 500, limit: 1 })).map((s) => s.event.seq)).toEqual([101]);
    expect((await log.read(id, { order: 'desc', sinceMs: at(298), limit: 10 })).map((s) => s.event.seq)).toEqual([300, 299, 298]);
    expect((await log.read(id, { order: 'asc', sinceMs: at(301), limit: 10 }))).toEqual([]);
    expect((await log.count(id, { sinceMs: at(101) }))).toBe(200);
    expect((await log.count(id, { sinceMs: at(101), kinds: ['state_update'] }))).toBe(range(101, 300).filter((seq) => seq % 3 === 0).length);
    expect((await log.count(id, { afterSeq: 290, sources: ['user'] }))).toBe(range(291, 300).filter((seq) => seq % 3 !== 0).length);
    expect((await log.count(id, { sinceMs: 0 }))).toBe(300);
  });

  it('pages in both orders with a cursor, with and without filters', async () => {
    for (const [order, kinds] of [['asc', undefined], ['desc', undefined], ['desc', ['state_update']], ['asc', ['message']]] as const) {
      const seen: number[] = [];
      let cursorSeq: number | undefined;
      for (;;) {
        const page = (await log.read(id, { order, cursorSeq, limit: 7, kinds }));
        seen.push(...page.map((s) => s.event.seq));
        if (page.length < 7) break;
        cursorSeq = page.at(-1)!.event.seq;
      }
      let expected = range(1, 300).filter((seq) => !kinds || (kinds[0] === 'state_update') === (seq % 3 === 0));
      if (order === 'desc') expected = expected.reverse();
      expect(seen).toEqual(expected);
    }
    expect((await log.read(id, { order: 'desc', afterSeq: 295, limit: 100 })).map((s) => s.event.seq)).toEqual([300, 299, 298, 297, 296]);
  });

  it('keeps kind-filtered reads current after appends, for several kinds at once and with a source', async () => {
    const seqs = async (kinds: ('message' | 'state_update')[], order: 'asc' | 'desc' = 'asc', limit = 1000) => (await log.read(id, { order, limit, kinds })).map((s) => s.event.seq);
    expect(await seqs(['state_update'])).toEqual(range(1, 300).filter((seq) => seq % 3 === 0)); // builds the per-kind lists
    (await fill(log, id, 6)); // seqs 301..306: 303 and 306 are state updates
    expect(await seqs(['state_update'], 'desc', 3)).toEqual([306, 303, 300]);
    expect(await seqs(['message', 'state_update'])).toEqual(range(1, 306));
    expect((await log.read(id, { order: 'asc', limit: 1000, kinds: ['message', 'state_update'], sources: ['user'] })).map((s) => s.event.seq)).toEqual(range(1, 306).filter((seq) => seq % 3 !== 0));
    expect((await log.count(id, { kinds: ['state_update'], afterSeq: 299 }))).toBe(3);
    expect((await log.count(id, { kinds: ['message', 'state_update'] }))).toBe(306);
  });
});

describe('FileEventLog firehose', () => {
  it('reads every conversation in append order and skips a dropped conversation', async () => {
    const log = openLog();
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    const order = [a, b, a, c, b, a, c, c, b, a];
    const appended = [];
    for (const [i, id] of order.entries()) appended.push(await log.append(id, message(`g${i}`)));
    expect((await log.readGlobal(0, 100)).map((entry) => entry.stored.json)).toEqual(appended.map((x) => x.json));
    expect((await log.readGlobal(4, 3)).map((entry) => entry.globalCursor)).toEqual([5, 6, 7]);

    (await log.drop(b));
    expect((await log.lastSeq(a))).toBe(4);
    const kept = appended.filter((x) => x.event.conversation_id !== b);
    const entries = (await log.readGlobal(0, 100));
    expect(entries.map((entry) => entry.stored.json)).toEqual(kept.map((x) => x.json));
    expect(entries.map((entry) => entry.globalCursor)).toEqual(kept.map((x) => x.globalCursor));
    // A limit counts delivered entries: the dropped ones in between do not use it up.
    expect((await log.readGlobal(0, 4)).map((entry) => entry.globalCursor)).toEqual([1, 3, 4, 6]);
    expect(await log.globalHead()).toBe(10);

    (await close(log));
    const reopened = openLog();
    expect((await reopened.readGlobal(0, 100)).map((entry) => entry.stored.json)).toEqual(kept.map((x) => x.json));
    expect((await reopened.append(c, message('late'))).globalCursor).toBe(11);
  });
});

describe('FileEventLog open files', () => {
  const openFiles = (id: string) => openFilesWith(id).length;

  it('opens a conversation\'s files on first use and closes them once idle, then reopens them on demand', async () => {
    const log = openLog({ idleCloseMs: 50 });
    const id = randomUUID();
    expect(openFiles(id)).toBe(0);
    await log.append(id, message('one'));
    expect(openFiles(id), 'the log and its index (the kind index keeps no fd open)').toBe(2);
    const deadline = Date.now() + 5_000;
    while (openFiles(id) > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(openFiles(id), 'closed when idle').toBe(0);
    expect((await log.append(id, message('two'))).event.seq).toBe(2);
    expect((await all(log, id)).map((stored) => stored.event.seq)).toEqual([1, 2]);
  });
});
