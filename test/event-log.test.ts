import fs from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileEventLog } from '../src/adapters/file-event-log/file-event-log.js';
import type { NewEvent } from '../src/core/schemas/event.js';
import { DamagedDataError } from '../src/core/errors.js';
import { tempDir } from './support/agentd.js';

let dir: string;
let now: number;
const logs: FileEventLog[] = [];

function openLog(options: { maxOpen?: number } = {}): FileEventLog {
  const log = new FileEventLog({ conversationsDir: path.join(dir, 'conversations'), firehoseFile: path.join(dir, 'firehose.idx'), clock: { now: () => now }, ...options });
  logs.push(log);
  return log;
}

function close(log: FileEventLog): void {
  log.close();
  logs.splice(logs.indexOf(log), 1);
}

const message = (content: string): NewEvent => ({ kind: 'message', source: 'user', role: 'user', content });
const status = (): NewEvent => ({ kind: 'state_update', source: 'system', status: 'running' });
const all = (log: FileEventLog, id: string) => log.read(id, { order: 'asc', limit: 1_000_000 });
const logFile = (id: string) => path.join(dir, 'conversations', id, 'events.jsonl');
const indexFile = (id: string) => path.join(dir, 'conversations', id, 'events.idx');
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

function fill(log: FileEventLog, id: string, n: number, stepMs = 1): void {
  for (let i = 1; i <= n; i++) {
    log.append(id, i % 3 === 0 ? status() : message(`event ${i} ${'é'.repeat(i % 5)}`));
    now += stepMs;
  }
}

beforeEach(() => {
  dir = tempDir('agentd-log-');
  now = Date.parse('2026-01-01T00:00:00.000Z');
});
afterEach(() => {
  for (const log of logs.splice(0)) log.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('FileEventLog appends', () => {
  it('numbers each conversation 1..N with no gaps, and stores exactly the returned JSON', () => {
    const log = openLog();
    const [a, b] = [randomUUID(), randomUUID()];
    const appended = [];
    for (let i = 0; i < 60; i++) appended.push(log.append(i % 4 === 0 ? b : a, message(`m${i}`)));
    expect(appended.filter((x) => x.event.conversation_id === a).map((x) => x.event.seq)).toEqual(range(1, 45));
    expect(appended.filter((x) => x.event.conversation_id === b).map((x) => x.event.seq)).toEqual(range(1, 15));
    expect(appended.map((x) => x.globalCursor)).toEqual(range(1, 60));
    for (const x of appended) expect(JSON.parse(x.json)).toEqual(x.event);
    expect(all(log, a).map((stored) => stored.json)).toEqual(appended.filter((x) => x.event.conversation_id === a).map((x) => x.json));
    expect(fs.readFileSync(logFile(a), 'utf8')).toBe(all(log, a).map((stored) => `${stored.json}\n`).join(''));
    expect(log.lastSeq(a)).toBe(45);
    expect(log.lastSeq(randomUUID())).toBe(0);
  });

  it('never lets timestamps go backwards, even when the clock does', () => {
    const log = openLog();
    const id = randomUUID();
    log.append(id, message('a'));
    now -= 60_000;
    const second = log.append(id, message('b'));
    expect(second.event.timestamp).toBe('2026-01-01T00:00:00.000Z');
  });

  it('reopens to identical lines, also when only a few files may be open at once', () => {
    const log = openLog({ maxOpen: 2 });
    const ids = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
    for (let i = 0; i < 200; i++) log.append(ids[i % 4]!, message(`m${i}`));
    const before = ids.map((id) => all(log, id).map((stored) => stored.json));
    expect(before.map((lines) => lines.length)).toEqual([50, 50, 50, 50]);
    const globalBefore = log.readGlobal(0, 1000).map((entry) => entry.stored.json);
    close(log);
    const reopened = openLog();
    expect(ids.map((id) => all(reopened, id).map((stored) => stored.json))).toEqual(before);
    expect(reopened.readGlobal(0, 1000).map((entry) => entry.stored.json)).toEqual(globalBefore);
    expect(reopened.append(ids[0]!, message('next')).event.seq).toBe(51);
    expect(reopened.append(ids[0]!, message('next')).globalCursor).toBe(202);
  });
});

describe('FileEventLog recovery on open', () => {
  let id: string;
  let lines: string[];

  beforeEach(() => {
    id = randomUUID();
    const log = openLog();
    fill(log, id, 40);
    lines = all(log, id).map((stored) => stored.json);
    close(log);
  });

  function reopenAndCheck(expectedCount: number): FileEventLog {
    const log = openLog();
    expect(log.lastSeq(id)).toBe(expectedCount);
    expect(all(log, id).map((stored) => stored.json)).toEqual(lines.slice(0, expectedCount));
    expect(fs.statSync(indexFile(id)).size).toBe(expectedCount * 32);
    expect(fs.readFileSync(logFile(id), 'utf8')).toBe(lines.slice(0, expectedCount).map((line) => `${line}\n`).join(''));
    const next = log.append(id, message('after recovery'));
    expect(next.event.seq).toBe(expectedCount + 1);
    expect(all(log, id).map((stored) => stored.event.seq)).toEqual(range(1, expectedCount + 1));
    close(log);
    expect(all(openLog(), id).at(-1)!.json).toBe(next.json);
    return log;
  }

  it('drops a torn last line (garbage without a newline)', () => {
    fs.appendFileSync(logFile(id), '{"id":"torn","seq":41,"kind":"mess');
    reopenAndCheck(40);
  });

  it('drops a last line cut in the middle (and the index entry that pointed past the end)', () => {
    fs.truncateSync(logFile(id), fs.statSync(logFile(id)).size - 10);
    reopenAndCheck(39);
  });

  it('drops a complete last line that is not an event', () => {
    fs.appendFileSync(logFile(id), 'not json\n');
    reopenAndCheck(40);
  });

  it('trims an index that is ahead of the log', () => {
    const cut = lines.slice(0, 25).reduce((size, line) => size + Buffer.byteLength(line) + 1, 0);
    fs.truncateSync(logFile(id), cut);
    reopenAndCheck(25);
  });

  it.each([
    ['missing', () => fs.rmSync(indexFile(id))],
    ['behind the log', () => fs.truncateSync(indexFile(id), 10 * 32)],
    ['ending in a partial entry', () => fs.truncateSync(indexFile(id), 30 * 32 + 7)],
    ['empty', () => fs.truncateSync(indexFile(id), 0)],
  ])('rebuilds an index that is %s', (_name, damage) => {
    damage();
    reopenAndCheck(40);
  });

  it('indexes a line the crash left unindexed, then drops a torn one after it', () => {
    fs.truncateSync(indexFile(id), 39 * 32);
    fs.appendFileSync(logFile(id), '{"partial');
    reopenAndCheck(40);
  });

  it('rebuilds index entries that disagree with the log', () => {
    const index = fs.readFileSync(indexFile(id));
    index.fill(0, 12 * 32, 14 * 32);
    fs.writeFileSync(indexFile(id), index);
    reopenAndCheck(40);
  });

  /** Opening fails with DamagedDataError naming the line, and leaves both files exactly as they were. */
  function expectDamaged(line: number, reason: RegExp): void {
    const before = [fs.readFileSync(logFile(id)), fs.readFileSync(indexFile(id))];
    const log = openLog();
    let thrown: unknown;
    try {
      log.lastSeq(id);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(DamagedDataError);
    expect((thrown as DamagedDataError).damage).toMatchObject({ file: 'events.jsonl', line, reason: expect.stringMatching(reason) });
    expect(() => log.append(id, message('must not land'))).toThrow(DamagedDataError);
    expect([fs.readFileSync(logFile(id)), fs.readFileSync(indexFile(id))]).toEqual(before);
  }

  it('refuses a log damaged in the middle, naming the line, and writes nothing', () => {
    const text = lines.map((line) => `${line}\n`);
    text[9] = `ror":false${text[9]!.slice(10)}`;
    fs.writeFileSync(logFile(id), text.join(''));
    expectDamaged(10, /not a complete JSON event/);
  });

  it('refuses a bad unindexed line that good lines follow (not a torn tail: nothing is cut off)', () => {
    fs.truncateSync(indexFile(id), 30 * 32);
    const text = lines.map((line) => `${line}\n`);
    text[34] = `{"torn"}\n`;
    fs.writeFileSync(logFile(id), text.join(''));
    expectDamaged(35, /not valid JSON|seq/);
  });

  it('refuses two events with the same seq (two writers on one log)', () => {
    fs.truncateSync(indexFile(id), 20 * 32);
    const text = lines.slice(0, 22).map((line) => `${line}\n`);
    text.push(text[21]!, ...lines.slice(22).map((line) => `${line}\n`));
    fs.writeFileSync(logFile(id), text.join(''));
    expectDamaged(23, /seq 22 where 23 was expected/);
  });

  it('trims a partial firehose record', () => {
    fs.appendFileSync(path.join(dir, 'firehose.idx'), Buffer.alloc(7, 1));
    const log = openLog();
    expect(log.globalHead()).toBe(40);
    expect(log.append(id, message('x')).globalCursor).toBe(41);
  });
});

describe('FileEventLog reads', () => {
  let log: FileEventLog;
  let id: string;
  let start: number;

  beforeEach(() => {
    log = openLog();
    id = randomUUID();
    start = now;
    fill(log, id, 300, 1000);
  });

  it('finds events by id, only in their own conversation', () => {
    const events = all(log, id);
    for (const seq of [1, 2, 150, 299, 300]) expect(log.findById(id, events[seq - 1]!.event.id)).toEqual(events[seq - 1]);
    expect(log.findById(id, randomUUID())).toBeUndefined();
    const other = randomUUID();
    const foreign = log.append(other, message('elsewhere'));
    expect(log.findById(id, foreign.event.id)).toBeUndefined();
    expect(log.findById(other, foreign.event.id)?.json).toBe(foreign.json);
  });

  it('finds `since` by timestamp (at or after), with filters and counts', () => {
    const at = (seq: number) => start + (seq - 1) * 1000;
    expect(log.read(id, { order: 'asc', sinceMs: at(101), limit: 3 }).map((s) => s.event.seq)).toEqual([101, 102, 103]);
    expect(log.read(id, { order: 'asc', sinceMs: at(101) - 500, limit: 1 }).map((s) => s.event.seq)).toEqual([101]);
    expect(log.read(id, { order: 'desc', sinceMs: at(298), limit: 10 }).map((s) => s.event.seq)).toEqual([300, 299, 298]);
    expect(log.read(id, { order: 'asc', sinceMs: at(301), limit: 10 })).toEqual([]);
    expect(log.count(id, { sinceMs: at(101) })).toBe(200);
    expect(log.count(id, { sinceMs: at(101), kinds: ['state_update'] })).toBe(range(101, 300).filter((seq) => seq % 3 === 0).length);
    expect(log.count(id, { afterSeq: 290, sources: ['user'] })).toBe(range(291, 300).filter((seq) => seq % 3 !== 0).length);
    expect(log.count(id, { sinceMs: 0 })).toBe(300);
  });

  it('pages in both orders with a cursor, with and without filters', () => {
    for (const [order, kinds] of [['asc', undefined], ['desc', undefined], ['desc', ['state_update']], ['asc', ['message']]] as const) {
      const seen: number[] = [];
      let cursorSeq: number | undefined;
      for (;;) {
        const page = log.read(id, { order, cursorSeq, limit: 7, kinds });
        seen.push(...page.map((s) => s.event.seq));
        if (page.length < 7) break;
        cursorSeq = page.at(-1)!.event.seq;
      }
      let expected = range(1, 300).filter((seq) => !kinds || (kinds[0] === 'state_update') === (seq % 3 === 0));
      if (order === 'desc') expected = expected.reverse();
      expect(seen).toEqual(expected);
    }
    expect(log.read(id, { order: 'desc', afterSeq: 295, limit: 100 }).map((s) => s.event.seq)).toEqual([300, 299, 298, 297, 296]);
  });

  it('keeps kind-filtered reads current after appends, for several kinds at once and with a source', () => {
    const seqs = (kinds: ('message' | 'state_update')[], order: 'asc' | 'desc' = 'asc', limit = 1000) => log.read(id, { order, limit, kinds }).map((s) => s.event.seq);
    expect(seqs(['state_update'])).toEqual(range(1, 300).filter((seq) => seq % 3 === 0)); // builds the per-kind lists
    fill(log, id, 6); // seqs 301..306: 303 and 306 are state updates
    expect(seqs(['state_update'], 'desc', 3)).toEqual([306, 303, 300]);
    expect(seqs(['message', 'state_update'])).toEqual(range(1, 306));
    expect(log.read(id, { order: 'asc', limit: 1000, kinds: ['message', 'state_update'], sources: ['user'] }).map((s) => s.event.seq)).toEqual(range(1, 306).filter((seq) => seq % 3 !== 0));
    expect(log.count(id, { kinds: ['state_update'], afterSeq: 299 })).toBe(3);
    expect(log.count(id, { kinds: ['message', 'state_update'] })).toBe(306);
  });
});

describe('FileEventLog firehose', () => {
  it('reads every conversation in append order and skips a dropped conversation', () => {
    const log = openLog();
    const [a, b, c] = [randomUUID(), randomUUID(), randomUUID()];
    const order = [a, b, a, c, b, a, c, c, b, a];
    const appended = order.map((id, i) => log.append(id, message(`g${i}`)));
    expect(log.readGlobal(0, 100).map((entry) => entry.stored.json)).toEqual(appended.map((x) => x.json));
    expect(log.readGlobal(4, 3).map((entry) => entry.globalCursor)).toEqual([5, 6, 7]);

    log.drop(b);
    expect(log.lastSeq(a)).toBe(4);
    const kept = appended.filter((x) => x.event.conversation_id !== b);
    const entries = log.readGlobal(0, 100);
    expect(entries.map((entry) => entry.stored.json)).toEqual(kept.map((x) => x.json));
    expect(entries.map((entry) => entry.globalCursor)).toEqual(kept.map((x) => x.globalCursor));
    // A limit counts delivered entries: the dropped ones in between do not use it up.
    expect(log.readGlobal(0, 4).map((entry) => entry.globalCursor)).toEqual([1, 3, 4, 6]);
    expect(log.globalHead()).toBe(10);

    close(log);
    const reopened = openLog();
    expect(reopened.readGlobal(0, 100).map((entry) => entry.stored.json)).toEqual(kept.map((x) => x.json));
    expect(reopened.append(c, message('late')).globalCursor).toBe(11);
  });
});
