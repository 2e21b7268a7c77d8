import fs from 'node:fs';
import path from 'node:path';
import { ENTRY_SIZE, decodeEntry, encodeEntry, idPrefixOf, kindCode, sourceCode, type IndexEntry } from './index-entry.js';
import type { AgentEvent } from '../../../core/schemas/event.js';
import { KindIndex } from './kind-index.js';
import { verifyLog, type LogState } from './log-verifier.js';
import { readAt, writeAll } from './whole-io.js';

/** A scan reads the index in chunks: small first (a page needs about `limit` entries), doubling up to the largest. */
const FIRST_SCAN_CHUNK_ENTRIES = 128;
const SCAN_CHUNK_ENTRIES = 2048;
/** Index entries of seqs this close are read with one read (ENTRY_SPAN entries, 8 KiB). */
const ENTRY_SPAN = 256;
/** Lines this close (bytes between them) are read with one read, up to LINE_SPAN bytes. */
const LINE_GAP = 4096;
const LINE_SPAN = 1 << 20;

/**
 * Index entries are written this many at a time (4 KiB), and on close: an append is one write(2)
 * of its line, not two. The log is the truth, so entries lost with the process are made again
 * from its lines on the next open (recover, verifyLog), as for a crash between the two writes.
 */
const INDEX_BATCH_ENTRIES = 128;

/**
 * One conversation's `events.jsonl` (the log: one JSON event a line, append-only),
 * `events.idx` (fixed-width entries, see index-entry.ts) and `events.kinds/` (the seqs of each
 * kind, see kind-index.ts). The log is the truth; the indexes are derived and repaired from it
 * on open, as is a torn last line left by a crash.
 */
export class ConversationLogFile {
  private logSize: number;
  private lastTimestampMs: number;
  count: number;
  /** Entries in the index file; those of seqs after it are in `pending`, written INDEX_BATCH_ENTRIES at a time. */
  private indexed: number;
  private pending: Buffer | null = null;
  private constructor(
    private readonly logFd: number,
    private readonly indexFd: number,
    private readonly fsync: boolean,
    /** The per-kind seq files (kind-index.ts), written in batches, never fsync'd: repaired from the index on open. */
    readonly kinds: KindIndex,
    state: { count: number; logSize: number; lastTimestampMs: number },
  ) {
    this.count = state.count;
    this.indexed = state.count;
    this.logSize = state.logSize;
    this.lastTimestampMs = state.lastTimestampMs;
  }

  /**
   * `verify`: read the whole log once and check it against the index (the first open in a
   * process); otherwise only the tail is checked (a file this process wrote itself).
   * Throws DamagedDataError, having written nothing, when the log is damaged beyond a torn last line.
   */
  static open(dir: string, options: { fsync: boolean; verify: boolean }): ConversationLogFile {
    fs.mkdirSync(dir, { recursive: true });
    const logFd = fs.openSync(path.join(dir, 'events.jsonl'), 'a+');
    const indexFd = fs.openSync(path.join(dir, 'events.idx'), 'a+');
    try {
      const state = options.verify ? verifyLog({ logFd, indexFd, dir }) : recover(logFd, indexFd);
      const kinds = new KindIndex(dir, state.count);
      try {
        // The first open in a process follows whatever the last one left (a crash too): every kind file is checked.
        if (options.verify) kinds.repairAll(indexFd);
        else kinds.checkTail(state.count > 0 ? decodeEntry(readAt(indexFd, ENTRY_SIZE, (state.count - 1) * ENTRY_SIZE), 0).kind : 0, indexFd);
      } catch (error) {
        kinds.close();
        throw error;
      }
      return new ConversationLogFile(logFd, indexFd, options.fsync, kinds, state);
    } catch (error) {
      fs.closeSync(logFd);
      fs.closeSync(indexFd);
      throw error;
    }
  }

  /** The timestamp the next event gets: now, but never earlier than the last one (keeps `since` searchable). */
  nextTimestamp(nowMs: number): number {
    return Math.max(nowMs, this.lastTimestampMs);
  }

  append(event: AgentEvent, json: string): void {
    const line = Buffer.from(`${json}\n`, 'utf8');
    const entry = encodeEntry({
      offset: this.logSize,
      length: line.length - 1,
      kind: kindCode(event.kind),
      source: sourceCode(event.source),
      timestampMs: Date.parse(event.timestamp),
      idPrefix: idPrefixOf(event.id),
    });
    const before = this.state();
    try {
      writeAll(this.logFd, line);
      const waiting = this.count - this.indexed;
      // A buffer of its own: allocUnsafe would slice it from Node's shared pool, and a file held
      // open keeps that whole pool alive with it (Node 24 made the pools much larger than a batch).
      this.pending ??= Buffer.allocUnsafeSlow(INDEX_BATCH_ENTRIES * ENTRY_SIZE);
      entry.copy(this.pending, waiting * ENTRY_SIZE);
      this.count += 1;
      this.kinds.append(kindCode(event.kind), this.count);
      if (this.fsync) {
        this.writeIndex();
        fs.fsyncSync(this.logFd);
        fs.fsyncSync(this.indexFd);
      } else if (waiting + 1 === INDEX_BATCH_ENTRIES) this.writeIndex();
    } catch (error) {
      // A write cut short (the disk is full) must not leave a partial line for the next append to follow.
      this.rollback(before);
      throw error;
    }
    this.logSize += line.length;
    this.lastTimestampMs = Date.parse(event.timestamp);
  }

  /** The index entries not yet in the file (those of seqs indexed+1..count). */
  private pendingEntries(): Buffer {
    return this.pending?.subarray(0, (this.count - this.indexed) * ENTRY_SIZE) ?? Buffer.alloc(0);
  }

  /** The pending index entries, at the end of the index file. */
  private writeIndex(): void {
    if (this.count === this.indexed) return;
    writeAll(this.indexFd, this.pendingEntries());
    this.indexed = this.count;
  }

  /** At close: the pending entries written if they can be; if not, the next open makes them again from the log. */
  private writePendingIndex(): void {
    try {
      this.writeIndex();
    } catch {
      // (recover/verifyLog index the log's lines that the index misses)
    }
  }

  /** The index entries of seqs first..last (within 1..count): from the file, then from those pending. */
  private readIndex(first: number, last: number): Buffer {
    if (last < first) return Buffer.alloc(0);
    const fromFile = Math.min(last, this.indexed) - first + 1;
    const filePart = fromFile > 0 ? readAt(this.indexFd, fromFile * ENTRY_SIZE, (first - 1) * ENTRY_SIZE) : null;
    if (last <= this.indexed) return filePart!;
    const pendingPart = this.pendingEntries().subarray(Math.max(first - this.indexed - 1, 0) * ENTRY_SIZE, (last - this.indexed) * ENTRY_SIZE);
    // A copy: later appends write over the pending buffer.
    return filePart ? Buffer.concat([filePart, pendingPart]) : Buffer.from(pendingPart);
  }

  /** Where the files end now: give it to `rollback` to undo appends made after. */
  state(): LogState {
    return { count: this.count, logSize: this.logSize, lastTimestampMs: this.lastTimestampMs };
  }

  rollback(state: LogState): void {
    fs.ftruncateSync(this.logFd, state.logSize);
    // Entries past the state's go from the file (and a partial one a failed write left) or from those pending.
    this.indexed = Math.min(this.indexed, state.count);
    fs.ftruncateSync(this.indexFd, this.indexed * ENTRY_SIZE);
    this.count = state.count;
    this.logSize = state.logSize;
    this.lastTimestampMs = state.lastTimestampMs;
    this.kinds.truncate(state.count);
  }

  /** Index entries for seqs [fromSeq, fromSeq + n). */
  entries(fromSeq: number, n: number): IndexEntry[] {
    const first = Math.max(1, fromSeq);
    const last = Math.min(this.count, fromSeq + n - 1);
    if (last < first) return [];
    const buffer = this.readIndex(first, last);
    const out: IndexEntry[] = [];
    for (let at = 0; at + ENTRY_SIZE <= buffer.length; at += ENTRY_SIZE) out.push(decodeEntry(buffer, at));
    return out;
  }

  /** Index entries of ascending seqs: seqs close together come in one read. */
  entriesOf(seqs: readonly number[]): IndexEntry[] {
    const out: IndexEntry[] = [];
    let i = 0;
    while (i < seqs.length) {
      let j = i;
      while (j + 1 < seqs.length && seqs[j + 1]! - seqs[i]! < ENTRY_SPAN) j++;
      const first = seqs[i]!;
      const buffer = this.readIndex(first, Math.min(seqs[j]!, this.count));
      for (let k = i; k <= j; k++) {
        const at = (seqs[k]! - first) * ENTRY_SIZE;
        if (at + ENTRY_SIZE <= buffer.length) out.push(decodeEntry(buffer, at));
      }
      i = j + 1;
    }
    return out;
  }

  entry(seq: number): IndexEntry | undefined {
    return this.entries(seq, 1)[0];
  }

  /** Visit seqs from `fromSeq` in direction `step` (+1 / -1), in chunks, until `visit` returns false. */
  scan(fromSeq: number, step: 1 | -1, visit: (seq: number, entry: IndexEntry) => boolean): void {
    let seq = fromSeq;
    let chunkSize = FIRST_SCAN_CHUNK_ENTRIES;
    while (seq >= 1 && seq <= this.count) {
      const chunkStart = step === 1 ? seq : Math.max(1, seq - chunkSize + 1);
      const chunk = this.entries(chunkStart, step === 1 ? chunkSize : seq - chunkStart + 1);
      chunkSize = Math.min(chunkSize * 2, SCAN_CHUNK_ENTRIES);
      if (chunk.length === 0) return;
      const ordered = step === 1 ? chunk : chunk.reverse();
      for (const entry of ordered) {
        if (!visit(seq, entry)) return;
        seq += step;
      }
    }
  }

  /** First seq whose timestamp is >= sinceMs (count + 1 when none): binary search over the index. */
  firstSeqAtOrAfter(sinceMs: number): number {
    let low = 1;
    let high = this.count + 1;
    while (low < high) {
      const mid = (low + high) >>> 1;
      const entry = this.entry(mid);
      if (entry && entry.timestampMs < sinceMs) low = mid + 1;
      else high = mid;
    }
    return low;
  }

  /** The JSON lines of entries in log order; lines with little between them are read with one read. */
  readLines(entries: readonly IndexEntry[]): string[] {
    const lines: string[] = [];
    let i = 0;
    while (i < entries.length) {
      let j = i;
      const start = entries[i]!.offset;
      while (j + 1 < entries.length) {
        const next = entries[j + 1]!;
        const gap = next.offset - (entries[j]!.offset + entries[j]!.length);
        if (gap < 0 || gap > LINE_GAP || next.offset + next.length - start > LINE_SPAN) break;
        j++;
      }
      const buffer = readAt(this.logFd, entries[j]!.offset + entries[j]!.length - start, start);
      for (let k = i; k <= j; k++) lines.push(buffer.toString('utf8', entries[k]!.offset - start, entries[k]!.offset - start + entries[k]!.length));
      i = j + 1;
    }
    return lines;
  }

  /** Close the files; false when the kind index could not be written (the next open must check it whole). */
  close(): boolean {
    this.writePendingIndex();
    const kindsWritten = this.kinds.close();
    fs.closeSync(this.logFd);
    fs.closeSync(this.indexFd);
    return kindsWritten;
  }

  /** close() with every system call made by the thread pool (closing all at shutdown); nothing may use the file meanwhile. */
  async closeAsync(): Promise<boolean> {
    const entries = this.pendingEntries();
    if (entries.length > 0) await new Promise<void>((resolve) => fs.write(this.indexFd, entries, 0, entries.length, null, () => resolve()));
    const kindsWritten = await this.kinds.closeAsync();
    await Promise.all([closeFd(this.logFd), closeFd(this.indexFd)]);
    return kindsWritten;
  }
}

function closeFd(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fs.close(fd, (error) => (error ? reject(error) : resolve())));
}

/**
 * Bring the index in line with the log after whatever a crash left: drop a partial index entry
 * and entries past the end of the log, cut a torn last line off the log, and index complete
 * lines the index missed.
 */
function recover(logFd: number, indexFd: number): LogState {
  let logSize = fs.fstatSync(logFd).size;
  const indexSize = fs.fstatSync(indexFd).size;
  let count = Math.floor(indexSize / ENTRY_SIZE);
  // Only the tail can be past the end of the log: read entries from the end (opening stays O(1), not O(events)).
  while (count > 0) {
    const last = decodeEntry(readAt(indexFd, ENTRY_SIZE, (count - 1) * ENTRY_SIZE), 0);
    if (last.offset + last.length + 1 <= logSize) break;
    count -= 1;
  }
  if (count * ENTRY_SIZE !== indexSize) fs.ftruncateSync(indexFd, count * ENTRY_SIZE);

  const lastEntry = count > 0 ? decodeEntry(readAt(indexFd, ENTRY_SIZE, (count - 1) * ENTRY_SIZE), 0) : undefined;
  let indexedEnd = lastEntry ? lastEntry.offset + lastEntry.length + 1 : 0;
  let lastTimestampMs = lastEntry?.timestampMs ?? 0;

  if (indexedEnd < logSize) {
    const tail = readAt(logFd, logSize - indexedEnd, indexedEnd);
    let lineStart = 0;
    while (lineStart < tail.length) {
      const newline = tail.indexOf(0x0a, lineStart);
      if (newline === -1) break;
      const text = tail.toString('utf8', lineStart, newline);
      let event: AgentEvent;
      try {
        event = JSON.parse(text) as AgentEvent;
      } catch {
        break;
      }
      if (event.seq !== count + 1) break;
      const timestampMs = Date.parse(event.timestamp);
      const entry = encodeEntry({
        offset: indexedEnd + lineStart,
        length: newline - lineStart,
        kind: kindCode(event.kind),
        source: sourceCode(event.source),
        timestampMs,
        idPrefix: idPrefixOf(event.id),
      });
      writeAll(indexFd, entry);
      count += 1;
      lastTimestampMs = timestampMs;
      lineStart = newline + 1;
    }
    indexedEnd += lineStart;
    if (indexedEnd < logSize) {
      fs.ftruncateSync(logFd, indexedEnd);
      logSize = indexedEnd;
    }
  }
  return { count, logSize, lastTimestampMs };
}
