import fs from 'node:fs';
import path from 'node:path';
import { EVENT_KINDS } from '../../core/schemas/event.js';
import { ENTRY_SIZE } from './index-entry.js';

/**
 * The per-kind indexes of one conversation: `events.kinds/<kind>.seq` holds the seqs of that
 * kind's events, ascending, 4 bytes each (uint32 LE), appended with the event. A `kind=` page
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

interface KindFile {
  fd: number;
  /** Seqs in the file. */
  length: number;
}

function readAt(fd: number, length: number, position: number): Buffer {
  const buffer = Buffer.allocUnsafe(length);
  let read = 0;
  while (read < length) {
    const n = fs.readSync(fd, buffer, read, length - read, position + read);
    if (n === 0) break;
    read += n;
  }
  return read === length ? buffer : buffer.subarray(0, read);
}

function writeAt(fd: number, buffer: Buffer, position: number): void {
  let written = 0;
  while (written < buffer.length) written += fs.writeSync(fd, buffer, written, buffer.length - written, position + written);
}

function fileName(kind: number): string {
  const name = EVENT_KINDS[kind - 1];
  if (!name) throw new Error(`unknown kind code ${kind}`);
  return `${name}.seq`;
}

export class KindIndex {
  /** Open files by kind code; null: the kind has no file (no event of it). */
  private readonly files = new Map<number, KindFile | null>();
  private readonly dir: string;

  /** `count`: the events in the index, which the files must not go past (seqs past it are dropped as each file is opened). */
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
    if (lastKind !== 0 && this.last(lastKind) !== this.count) this.repairAll(indexFd);
  }

  append(kind: number, seq: number): void {
    const file = this.file(kind, true)!;
    const buffer = Buffer.allocUnsafe(SEQ_SIZE);
    buffer.writeUInt32LE(seq, 0);
    writeAt(file.fd, buffer, file.length * SEQ_SIZE);
    file.length += 1;
    this.count = seq;
  }

  /** Drop seqs past `count` (appends undone). */
  truncate(count: number): void {
    this.count = count;
    for (const file of this.files.values()) if (file) this.trim(file);
  }

  /** How many events of `kind` have a seq in [low, high]. */
  countIn(kind: number, low: number, high: number): number {
    const file = this.file(kind, false);
    if (!file) return 0;
    return this.lowerBound(file, high + 1) - this.lowerBound(file, low);
  }

  /** The seqs of `kind` in [low, high], ascending or descending, read in growing chunks. */
  *seqs(kind: number, low: number, high: number, order: 'asc' | 'desc'): Generator<number> {
    const file = this.file(kind, false);
    if (!file || low > high) return;
    const start = this.lowerBound(file, low);
    const end = this.lowerBound(file, high + 1); // exclusive
    let chunk = FIRST_CHUNK;
    if (order === 'asc') {
      for (let at = start; at < end; ) {
        const n = Math.min(chunk, end - at);
        const buffer = readAt(file.fd, n * SEQ_SIZE, at * SEQ_SIZE);
        for (let i = 0; i + SEQ_SIZE <= buffer.length; i += SEQ_SIZE) yield buffer.readUInt32LE(i);
        at += n;
        chunk = Math.min(chunk * 2, MAX_CHUNK);
      }
    } else {
      for (let at = end; at > start; ) {
        const n = Math.min(chunk, at - start);
        const buffer = readAt(file.fd, n * SEQ_SIZE, (at - n) * SEQ_SIZE);
        for (let i = buffer.length - SEQ_SIZE; i >= 0; i -= SEQ_SIZE) yield buffer.readUInt32LE(i);
        at -= n;
        chunk = Math.min(chunk * 2, MAX_CHUNK);
      }
    }
  }

  /**
   * Make every file agree with the index (read whole, in chunks): files that differ are
   * rewritten, files of kinds the index lacks are removed. O(events): on the first open in a
   * process (after the log itself was read whole) and when a reopen finds the files are not the index's.
   */
  repairAll(indexFd: number): void {
    this.closeFiles();
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
    if (expected.size > 0) fs.mkdirSync(this.dir, { recursive: true });
    for (let kind = 1; kind <= EVENT_KINDS.length; kind++) {
      const target = path.join(this.dir, fileName(kind));
      const seqs = expected.get(kind);
      if (!seqs) {
        fs.rmSync(target, { force: true });
        continue;
      }
      const want = Buffer.allocUnsafe(seqs.length * SEQ_SIZE);
      for (let i = 0; i < seqs.length; i++) want.writeUInt32LE(seqs[i]!, i * SEQ_SIZE);
      let have: Buffer | null = null;
      try {
        have = fs.readFileSync(target);
      } catch {
        have = null;
      }
      if (have && have.equals(want)) continue;
      // Rewritten beside and renamed over: a crash here leaves the old file or the new, never half of one.
      const temporary = `${target}.tmp`;
      fs.writeFileSync(temporary, want);
      fs.renameSync(temporary, target);
    }
  }

  close(): void {
    this.closeFiles();
  }

  private closeFiles(): void {
    for (const file of this.files.values()) if (file) fs.closeSync(file.fd);
    this.files.clear();
  }

  /** The last seq of `kind` (0 when none). */
  private last(kind: number): number {
    const file = this.file(kind, false);
    if (!file || file.length === 0) return 0;
    return readAt(file.fd, SEQ_SIZE, (file.length - 1) * SEQ_SIZE).readUInt32LE(0);
  }

  /** Open a kind's file (created when `create`), cutting a torn last seq and seqs past `count`. */
  private file(kind: number, create: boolean): KindFile | null {
    const known = this.files.get(kind);
    if (known || (known === null && !create)) return known;
    const target = path.join(this.dir, fileName(kind));
    let fd: number;
    try {
      fd = fs.openSync(target, fs.constants.O_RDWR);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      if (!create) {
        this.files.set(kind, null);
        return null;
      }
      fs.mkdirSync(this.dir, { recursive: true });
      fd = fs.openSync(target, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o600);
    }
    const size = fs.fstatSync(fd).size;
    const file: KindFile = { fd, length: Math.floor(size / SEQ_SIZE) };
    if (size !== file.length * SEQ_SIZE) fs.ftruncateSync(fd, file.length * SEQ_SIZE);
    this.trim(file);
    this.files.set(kind, file);
    return file;
  }

  private trim(file: KindFile): void {
    if (file.length === 0) return;
    if (readAt(file.fd, SEQ_SIZE, (file.length - 1) * SEQ_SIZE).readUInt32LE(0) <= this.count) return;
    file.length = this.lowerBound(file, this.count + 1);
    fs.ftruncateSync(file.fd, file.length * SEQ_SIZE);
  }

  /** Position of the first seq >= value in a file: halves with single reads, then one block. */
  private lowerBound(file: KindFile, value: number): number {
    let low = 0;
    let high = file.length;
    while (high - low > SEARCH_BLOCK) {
      const middle = (low + high) >>> 1;
      if (readAt(file.fd, SEQ_SIZE, middle * SEQ_SIZE).readUInt32LE(0) < value) low = middle + 1;
      else high = middle;
    }
    if (low === high) return low;
    const block = readAt(file.fd, (high - low) * SEQ_SIZE, low * SEQ_SIZE);
    let at = 0;
    while (at + SEQ_SIZE <= block.length && block.readUInt32LE(at) < value) at += SEQ_SIZE;
    return low + at / SEQ_SIZE;
  }
}
