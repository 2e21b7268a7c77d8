import fs from 'node:fs';
import path from 'node:path';
import { EVENT_KINDS } from '../../../core/schemas/event.js';
import { ENTRY_SIZE } from './index-entry.js';
import { readAt, writeAt } from './whole-io.js';
import { writeFileAtomic } from '../atomic-write.js';

/**
 * The per-kind indexes of one conversation: `events.kinds/<kind>.seq` holds the seqs of that
 * kind's events, ascending, 4 bytes each (uint32 LE); the latest seqs wait in memory and are
 * written in batches and when the files are closed (no fd is kept open). A `kind=` page
 * finds its cursor with a binary search and then reads `limit` seqs, whatever the kind's share of
 * the log; a kind without a file has no event.
 *
 * Derived from `events.idx` (itself derived from the log), never the truth: `repairAll` rebuilds
 * whatever disagrees with the index (the first open in a process, so after any crash), and a
 * reopen in the process that wrote the files checks their tails (`open`).
 */
export const KINDS_DIR = 'events.kinds';
const SEQ_SIZE = 4;
/** Where an index entry keeps its kind code (see index-entry.ts). */
const KIND_BYTE = 10;
/** A binary search reads one block once the range is this small. */
const SEARCH_BLOCK = 1024;
const FIRST_CHUNK = 128;
const MAX_CHUNK = 4096;
const REBUILD_CHUNK_ENTRIES = 8192;
/**
 * Appended seqs are written this many at a time (and on close): a write per kind with seqs
 * pending every 512 events of the conversation, and at most ~4 KiB of them held for each of the
 * conversations open (used in the last minute: file-event-log.ts), not 32 KiB.
 */
const FLUSH_AT = 512;

/** What a kind's file holds (read when the kind is first used). */
interface KindFile {
  /** Seqs in the file. */
  length: number;
  /** The last of them (0 when none). */
  last: number;
}

function fileName(kind: number): string {
  const name = EVENT_KINDS[kind - 1];
  if (!name) throw new Error(`unknown kind code ${kind}`);
  return `${name}.seq`;
}

export class KindIndex {
  /** What each kind's file holds; null: the kind has no file (no event of it). */
  private readonly files = new Map<number, KindFile | null>();
  /** Seqs appended but not yet written, by kind: all past their file's last. */
  private readonly pending = new Map<number, number[]>();
  private pendingCount = 0;
  private readonly dir: string;

  /** `count`: the events in the index, which the files must not go past (seqs past it are dropped as each file is first used). */
  constructor(
    conversationDir: string,
    private count: number,
  ) {
    this.dir = path.join(conversationDir, KINDS_DIR);
  }

  /**
   * The cheap check of a reopen in the process that wrote the files: the file of `lastKind` (the
   * kind code of event `count`, 0 when there is none) must end with `count`; else the files are
   * not this index's (lost, or behind it) and are rebuilt from it (`repairAll`).
   */
  checkTail(lastKind: number, indexFd: number): void {
    if (lastKind !== 0 && (this.file(lastKind)?.last ?? 0) !== this.count) this.repairAll(indexFd);
  }

  /**
   * Seqs are kept in memory and written FLUSH_AT at a time and on close (no fd is held between
   * writes): what a crash loses is rebuilt by the next process's first open. A failed write is
   * retried with the next one.
   */
  append(kind: number, seq: number): void {
    let list = this.pending.get(kind);
    if (!list) this.pending.set(kind, (list = []));
    list.push(seq);
    this.pendingCount += 1;
    this.count = seq;
    if (this.pendingCount >= FLUSH_AT) {
      try {
        this.flush();
      } catch {
        // Kept pending; the close reports a write that still fails.
      }
    }
  }

  /** Write the pending seqs to their files (throws when a write fails; what was not written stays pending). */
  flush(): void {
    for (const [kind, seqs] of this.pending) {
      const file = this.file(kind) ?? { length: 0, last: 0 };
      makeDir(this.dir);
      const buffer = encodeSeqs(seqs);
      const fd = fs.openSync(path.join(this.dir, fileName(kind)), fs.constants.O_RDWR | fs.constants.O_CREAT, 0o600);
      try {
        writeAt(fd, buffer, file.length * SEQ_SIZE);
      } finally {
        fs.closeSync(fd);
      }
      this.files.set(kind, { length: file.length + seqs.length, last: seqs.at(-1)! });
      this.pending.delete(kind);
      this.pendingCount -= seqs.length;
    }
  }

  /** Drop seqs past `count` (appends undone). */
  truncate(count: number): void {
    this.count = count;
    for (const [kind, seqs] of this.pending) {
      const kept = seqs.filter((seq) => seq <= count);
      this.pendingCount -= seqs.length - kept.length;
      if (kept.length > 0) this.pending.set(kind, kept);
      else this.pending.delete(kind);
    }
    for (const [kind, file] of this.files) {
      if (!file || file.last <= count) continue;
      this.withFd(kind, (fd) => {
        const length = this.lowerBound(fd, file.length, count + 1);
        fs.ftruncateSync(fd, length * SEQ_SIZE);
        this.files.set(kind, { length, last: length > 0 ? readAt(fd, SEQ_SIZE, (length - 1) * SEQ_SIZE).readUInt32LE(0) : 0 });
      });
    }
  }

  /** How many events of `kind` have a seq in [low, high]. */
  countIn(kind: number, low: number, high: number): number {
    const pending = this.pending.get(kind) ?? [];
    let n = lowerBound(pending, high + 1) - lowerBound(pending, low);
    const file = this.file(kind);
    if (file && file.length > 0 && low <= file.last) n += this.withFd(kind, (fd) => this.lowerBound(fd, file.length, high + 1) - this.lowerBound(fd, file.length, low));
    return n;
  }

  /** The seqs of `kind` in [low, high], ascending or descending: the file's in growing chunks, then those pending. */
  *seqs(kind: number, low: number, high: number, order: 'asc' | 'desc'): Generator<number> {
    if (low > high) return;
    const pending = this.pending.get(kind) ?? [];
    const pendingStart = lowerBound(pending, low);
    const pendingEnd = lowerBound(pending, high + 1);
    if (order === 'desc') for (let i = pendingEnd - 1; i >= pendingStart; i--) yield pending[i]!;
    const file = this.file(kind);
    if (file && file.length > 0 && low <= file.last) {
      const [start, end] = this.withFd(kind, (fd) => [this.lowerBound(fd, file.length, low), this.lowerBound(fd, file.length, high + 1)] as const);
      let chunk = FIRST_CHUNK;
      if (order === 'asc') {
        for (let at = start; at < end; ) {
          const n = Math.min(chunk, end - at);
          const buffer = this.withFd(kind, (fd) => readAt(fd, n * SEQ_SIZE, at * SEQ_SIZE));
          for (let i = 0; i + SEQ_SIZE <= buffer.length; i += SEQ_SIZE) yield buffer.readUInt32LE(i);
          at += n;
          chunk = Math.min(chunk * 2, MAX_CHUNK);
        }
      } else {
        for (let at = end; at > start; ) {
          const n = Math.min(chunk, at - start);
          const buffer = this.withFd(kind, (fd) => readAt(fd, n * SEQ_SIZE, (at - n) * SEQ_SIZE));
          for (let i = buffer.length - SEQ_SIZE; i >= 0; i -= SEQ_SIZE) yield buffer.readUInt32LE(i);
          at -= n;
          chunk = Math.min(chunk * 2, MAX_CHUNK);
        }
      }
    }
    if (order === 'asc') for (let i = pendingStart; i < pendingEnd; i++) yield pending[i]!;
  }

  /**
   * Make every file agree with the index (read whole, in chunks): files that differ are
   * rewritten, files of kinds the index lacks are removed. O(events): on the first open in a
   * process (after the log itself was read whole) and when a reopen finds the files are not the index's.
   */
  repairAll(indexFd: number): void {
    this.files.clear();
    this.pending.clear();
    this.pendingCount = 0;
    const expected = new Map<number, number[]>();
    for (let first = 1; first <= this.count; first += REBUILD_CHUNK_ENTRIES) {
      const n = Math.min(REBUILD_CHUNK_ENTRIES, this.count - first + 1);
      const buffer = readAt(indexFd, n * ENTRY_SIZE, (first - 1) * ENTRY_SIZE);
      for (let at = 0, seq = first; at + ENTRY_SIZE <= buffer.length; at += ENTRY_SIZE, seq += 1) {
        const kind = buffer[at + KIND_BYTE] as number;
        let list = expected.get(kind);
        if (!list) expected.set(kind, (list = []));
        list.push(seq);
      }
    }
    if (expected.size > 0) makeDir(this.dir);
    // Files of kinds the index lacks go: found with one listing (an rm per kind, most of them absent, cost a failed lstat and an exception each).
    for (const name of listDir(this.dir)) {
      const kind = name.endsWith('.seq') ? EVENT_KINDS.indexOf(name.slice(0, -'.seq'.length) as (typeof EVENT_KINDS)[number]) + 1 : 0;
      if (kind > 0 && !expected.has(kind)) fs.rmSync(path.join(this.dir, name), { force: true });
    }
    for (const [kind, seqs] of expected) {
      // Entries of no known kind (code 0) have no file, as before.
      if (kind < 1 || kind > EVENT_KINDS.length) continue;
      const target = path.join(this.dir, fileName(kind));
      const want = encodeSeqs(seqs);
      let have: Buffer | null = null;
      try {
        have = fs.readFileSync(target);
      } catch {
        have = null;
      }
      if (!have || !have.equals(want)) {
        // Rewritten beside and renamed over: a crash here leaves the old file or the new, never half of one.
        writeFileAtomic(target, want, { temp: `${target}.tmp` });
      }
      this.files.set(kind, { length: seqs.length, last: seqs.at(-1)! });
    }
    // Every file now is what the index says, so the first append of a kind opens nothing to learn it
    // (at shutdown, a thousand conversations' new kinds cost a failed open each on the main thread).
    for (let kind = 1; kind <= EVENT_KINDS.length; kind++) if (!this.files.has(kind)) this.files.set(kind, null);
  }

  /** Forget what is pending (the conversation is being dropped). */
  discard(): void {
    this.pending.clear();
    this.pendingCount = 0;
  }

  /**
   * close() through the thread pool, for closing many at once (shutdown): each conversation's
   * first write makes its directory and a file per kind, and a thousand of those made by the main
   * thread held the event loop waiting for the disk (P13). Nothing appends meanwhile.
   * False when a write failed (the files are then behind the index, as after a crash).
   */
  async closeAsync(): Promise<boolean> {
    try {
      let madeDir = false;
      for (const [kind, seqs] of [...this.pending]) {
        // Known without a system call once the kind was used in this process (a first use opens the file, creating nothing).
        const file = this.file(kind) ?? { length: 0, last: 0 };
        if (!madeDir) {
          await fs.promises.mkdir(this.dir).catch((error: NodeJS.ErrnoException) => {
            if (error.code !== 'EEXIST') throw error;
          });
          madeDir = true;
        }
        const handle = await fs.promises.open(path.join(this.dir, fileName(kind)), fs.constants.O_RDWR | fs.constants.O_CREAT, 0o600);
        try {
          const buffer = encodeSeqs(seqs);
          for (let written = 0; written < buffer.length; ) written += (await handle.write(buffer, written, buffer.length - written, file.length * SEQ_SIZE + written)).bytesWritten;
        } finally {
          await handle.close();
        }
        this.files.set(kind, { length: file.length + seqs.length, last: seqs.at(-1)! });
        this.pending.delete(kind);
        this.pendingCount -= seqs.length;
      }
      return true;
    } catch {
      return false;
    }
  }

  /** Write what is pending; false when that failed (the files are then behind the index). */
  close(): boolean {
    try {
      this.flush();
      return true;
    } catch {
      return false;
    }
  }

  private withFd<T>(kind: number, use: (fd: number) => T): T {
    const fd = fs.openSync(path.join(this.dir, fileName(kind)), fs.constants.O_RDWR);
    try {
      return use(fd);
    } finally {
      fs.closeSync(fd);
    }
  }

  /** What a kind's file holds, read on first use: a torn last seq and seqs past `count` are cut off. */
  private file(kind: number): KindFile | null {
    const known = this.files.get(kind);
    if (known !== undefined) return known;
    let fd: number;
    try {
      fd = fs.openSync(path.join(this.dir, fileName(kind)), fs.constants.O_RDWR);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      this.files.set(kind, null);
      return null;
    }
    try {
      const size = fs.fstatSync(fd).size;
      let length = Math.floor(size / SEQ_SIZE);
      if (size !== length * SEQ_SIZE) fs.ftruncateSync(fd, length * SEQ_SIZE);
      let last = length > 0 ? readAt(fd, SEQ_SIZE, (length - 1) * SEQ_SIZE).readUInt32LE(0) : 0;
      if (last > this.count) {
        length = this.lowerBound(fd, length, this.count + 1);
        fs.ftruncateSync(fd, length * SEQ_SIZE);
        last = length > 0 ? readAt(fd, SEQ_SIZE, (length - 1) * SEQ_SIZE).readUInt32LE(0) : 0;
      }
      const file = { length, last };
      this.files.set(kind, file);
      return file;
    } finally {
      fs.closeSync(fd);
    }
  }

  /** Position of the first seq >= value in a file of `length` seqs: halves with single reads, then one block. */
  private lowerBound(fd: number, length: number, value: number): number {
    let low = 0;
    let high = length;
    while (high - low > SEARCH_BLOCK) {
      const middle = (low + high) >>> 1;
      if (readAt(fd, SEQ_SIZE, middle * SEQ_SIZE).readUInt32LE(0) < value) low = middle + 1;
      else high = middle;
    }
    if (low === high) return low;
    const block = readAt(fd, (high - low) * SEQ_SIZE, low * SEQ_SIZE);
    let at = 0;
    while (at + SEQ_SIZE <= block.length && block.readUInt32LE(at) < value) at += SEQ_SIZE;
    return low + at / SEQ_SIZE;
  }
}

/** A kind file's bytes for these seqs. */
function encodeSeqs(seqs: readonly number[]): Buffer {
  const buffer = Buffer.allocUnsafe(seqs.length * SEQ_SIZE);
  for (let i = 0; i < seqs.length; i++) buffer.writeUInt32LE(seqs[i]!, i * SEQ_SIZE);
  return buffer;
}

/** The kinds directory, inside the conversation's (never recreated here: a conversation removed stays removed). */
function makeDir(dir: string): void {
  try {
    fs.mkdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
}

/** The names in a directory; none when it does not exist. */
function listDir(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

/** Index of the first element >= value in an ascending list. */
function lowerBound(list: readonly number[], value: number): number {
  let low = 0;
  let high = list.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if ((list[middle] as number) < value) low = middle + 1;
    else high = middle;
  }
  return low;
}
