import fs from 'node:fs';
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import { ConversationRecord } from '../../core/conversations/conversation-record.js';
import type { SecretBox } from '../../core/secrets/secret-box.js';
import { normalizeLlmConfig, withoutUnsetLlmFields, type CompactLlmConfig } from '../../core/schemas/llm-config.js';
import { sameList } from '../../core/conversations/conversation-index.js';
import { VERSION } from '../../version.js';
import { zeroUsage } from '../../core/schemas/usage.js';
import { schemaShape } from './zod-schema-shape.js';
import { writeFileAtomicAsync } from './atomic-write.js';

/**
 * What a file was when the snapshot was written: a save replaces the file (a new inode, a new
 * ctime), an edit in place changes its size, mtime and ctime, and nothing but the kernel sets a
 * ctime (a restored backup or a copy with its old mtime still gets a new one).
 */
export type FileStamp = readonly [ino: number, size: number, mtimeMs: number, ctimeMs: number];

export function stampOf(stat: fs.Stats): FileStamp {
  return [stat.ino, stat.size, stat.mtimeMs, stat.ctimeMs];
}

/**
 * Whether the file is as stamped: compared field by field, with nothing built (start-up checks
 * one stamp per conversation; a text stamp cost two float-to-text conversions each). The JSON of
 * the snapshot gives each number back exactly.
 */
export function hasStamp(stat: fs.Stats, stamp: FileStamp | null | undefined): boolean {
  return Array.isArray(stamp) && stat.ino === stamp[0] && stat.size === stamp[1] && stat.mtimeMs === stamp[2] && stat.ctimeMs === stamp[3];
}

export interface SnapshotEntry {
  record: ConversationRecord;
  /** The stamp of the record's file as the snapshot saw it. */
  stamp: FileStamp;
  /** The stamp of the conversation's event log and the events it held then (null: no log file): the log's summary while the log is unchanged. */
  log: { stamp: FileStamp; eventCount: number } | null;
}

/** Numbers per record in the stamps: its file's stamp, its log's stamp (an inode of -1: no log) and the log's event count. */
const STAMP_NUMBERS = 9;

/**
 * What the last clean shutdown saved: the records (in its order), with what it saw of each
 * record's file and log kept in one array of numbers rather than two arrays and an object per
 * record (30,000 objects fewer to make at 10,000 records).
 */
export class SavedSnapshot {
  constructor(
    readonly records: ConversationRecord[],
    private readonly stamps: Float64Array,
    /** Random per save: the summaries a clean shutdown saved name it (summaries.json) when they are this snapshot's. */
    readonly token: string,
    /** The conversations directory's stamp when it was saved: while it is unchanged, no directory was added or removed since. */
    readonly dirStamp: FileStamp | null,
  ) {}

  /** Whether the i-th record's file is as the snapshot saw it. */
  recordUnchanged(i: number, stat: fs.Stats): boolean {
    return sameStamp(stat, this.stamps, i * STAMP_NUMBERS);
  }

  /** Whether the i-th record's log existed when it was saved. */
  hadLog(i: number): boolean {
    return this.stamps[i * STAMP_NUMBERS + 4] !== -1;
  }

  /** Whether the i-th record's log is as the snapshot saw it. */
  logUnchanged(i: number, stat: fs.Stats): boolean {
    return this.hadLog(i) && sameStamp(stat, this.stamps, i * STAMP_NUMBERS + 4);
  }

  /** The events the i-th record's log held when it was saved. */
  eventCount(i: number): number {
    return this.stamps[i * STAMP_NUMBERS + 8]!;
  }
}

function sameStamp(stat: fs.Stats, numbers: Float64Array, at: number): boolean {
  return stat.ino === numbers[at] && stat.size === numbers[at + 1] && stat.mtimeMs === numbers[at + 2] && stat.ctimeMs === numbers[at + 3];
}

const IV_BYTES = 12;
/** The stamps' byte length, before them (uint32, little-endian). */
const LENGTH_BYTES = 4;
const TAG_BYTES = 16;
/**
 * Read and sealed a piece at a time: the snapshot (a line per conversation) is never whole in
 * memory. 64 KiB, not more: each piece's decrypted bytes (a malloc under glibc's 128 KiB mmap
 * threshold) and its text (under V8's large-object size) then reuse memory that earlier pieces
 * freed, where pieces past that size each took fresh pages from the kernel: a page fault each, thousands
 * of them for a data dir with many conversations.
 */
const PIECE_BYTES = 64 * 1024;

/**
 * `<dataDir>/conversations.snapshot`: every conversation record, written at a clean shutdown so
 * that the next start reads one file instead of one per conversation (and skips decrypting and
 * validating each), with its event log's summary. Right after the clean shutdown that wrote it,
 * every entry is used as it is, without a look at the files: that shutdown's summaries.json names
 * the snapshot's token (instead of holding each summary again), and start-up removes it before
 * anything is saved. It is kept across starts, a cache rather than the truth: after a crash, an
 * entry is used only while its record file still has the stamp it had (a save since, another
 * program, a restored backup, a hand edit: that record is read from its file), and its summary
 * only while its log does (an unchanged log need not be read either).
 * A clean shutdown writes it anew. The whole snapshot is sealed with the server's secret key
 * (AES-256-GCM): the secrets it holds are never on disk in clear, and a snapshot that is torn,
 * damaged or from another key fails authentication and is ignored (the files are read).
 *
 * Layout: iv | stamps' byte length | stamps | sealed lines | tag. The stamps (SavedSnapshot: inode
 * numbers, sizes and times of the data dir's own files, no secret) are in clear, authenticated by
 * the tag (GCM's additional data): read straight into their array, neither decrypted nor decoded
 * (as base64 in the first line they added to the text to decrypt, and took their own decoding).
 * The first line is `[tag, token, dirStamp, workdirBase]`: the tag of the server that
 * wrote it (see `snapshotTag`), the save's random token, the conversations directory's stamp and
 * the workdir base (see CompactRecord); then one JSON line per record.
 */
export class RecordSnapshot {
  /** The removal of the snapshot after a DELETE, until a new one is saved. */
  private discarding: Promise<void> | undefined;

  /** `workdirBase`: where conversations without a workdir of their own get one (`<base>/<id>`), the server's AGENTD_WORKDIR_BASE. */
  constructor(
    private readonly file: string,
    private readonly box: SecretBox,
    private readonly workdirBase: string | null = null,
  ) {}

  /**
   * What the last clean shutdown saved, or null when there is none to trust (none, torn, damaged,
   * from another key or another server). The file stays.
   */
  load(): SavedSnapshot | null {
    let fd: number;
    try {
      fd = fs.openSync(this.file, 'r');
    } catch {
      return null;
    }
    let saved: SavedSnapshot | null = null;
    try {
      saved = this.read(fd);
    } catch {
      saved = null;
    } finally {
      fs.closeSync(fd);
    }
    // Never of use: not read again at the next start.
    if (saved === null) fs.rmSync(this.file, { force: true });
    return saved;
  }

  /**
   * Decrypted a piece at a time, decoded up to its last newline byte (never part of a UTF-8
   * character) and parsed line by line. The token only once the tag at the end authenticates all of it.
   */
  private read(fd: number): SavedSnapshot | null {
    const size = fs.fstatSync(fd).size;
    if (size < IV_BYTES + LENGTH_BYTES + TAG_BYTES) return null;
    const iv = Buffer.alloc(IV_BYTES);
    const tag = Buffer.alloc(TAG_BYTES);
    fs.readSync(fd, iv, 0, IV_BYTES, 0);
    fs.readSync(fd, tag, 0, TAG_BYTES, size - TAG_BYTES);
    const clear = readClear(fd, size);
    if (clear === null) return null;
    const opening = this.box.opening(iv, tag, clear.bytes);
    let header: Header | null = null;
    const records: ConversationRecord[] = [];
    const line = (text: string) => {
      if (header === null) return void (header = readHeader(text));
      records.push(fullRecord(JSON.parse(text) as CompactRecord, records.at(-1), header.workdirPrefix));
    };
    // The pieces of a line that later pieces end (one longer than a piece): copied once, when it ends.
    const partial: Buffer[] = [];
    const consume = (bytes: Buffer) => {
      let start = 0;
      if (partial.length > 0) {
        const end = bytes.indexOf(10);
        if (end < 0) return void partial.push(bytes);
        partial.push(bytes.subarray(0, end));
        line(Buffer.concat(partial).toString('utf8'));
        partial.length = 0;
        start = end + 1;
      }
      const end = bytes.lastIndexOf(10);
      if (end < start) {
        if (start < bytes.length) partial.push(bytes.subarray(start));
        return;
      }
      if (end + 1 < bytes.length) partial.push(bytes.subarray(end + 1));
      // One text for the piece's whole lines; each line a slice of it, no copy.
      const text = bytes.toString('utf8', start, end + 1);
      for (let from = 0, newline = text.indexOf('\n'); newline >= 0; from = newline + 1, newline = text.indexOf('\n', from)) line(text.slice(from, newline));
    };
    const piece = Buffer.alloc(PIECE_BYTES);
    for (let at = IV_BYTES + clear.bytes.length; at < size - TAG_BYTES; ) {
      const read = fs.readSync(fd, piece, 0, Math.min(PIECE_BYTES, size - TAG_BYTES - at), at);
      if (read === 0) return null;
      at += read;
      consume(opening.update(piece.subarray(0, read)));
    }
    consume(opening.final());
    // Set by the first line (a closure's assignment, which the compiler does not follow).
    const saved = header as Header | null;
    if (partial.length > 0 || saved === null || clear.stamps.length !== records.length * STAMP_NUMBERS) return null;
    return new SavedSnapshot(records, clear.stamps, saved.token, saved.dirStamp);
  }

  /**
   * Removed, once per process, when a conversation is deleted: its record (its LLM key, its
   * secrets) must not outlive the DELETE on disk, even sealed. The next clean shutdown writes a
   * new one; a crash before it reads the files, as without a snapshot.
   */
  discard(): Promise<void> {
    return (this.discarding ??= fs.promises.rm(this.file, { force: true }));
  }

  /**
   * Written once nothing saves records any more (a clean shutdown): a temp file, then renamed.
   * `dirStamp`: the conversations directory's, taken before the entries' (see SavedSnapshot).
   * Resolves to its token.
   */
  async save(entries: readonly SnapshotEntry[], dirStamp: FileStamp | null): Promise<string> {
    const token = randomBytes(12).toString('base64url');
    const stamps = new Float64Array(entries.length * STAMP_NUMBERS);
    entries.forEach(({ stamp, log }, i) => {
      const at = i * STAMP_NUMBERS;
      stamps.set(stamp, at);
      if (log) stamps.set([...log.stamp, log.eventCount], at + 4);
      else stamps[at + 4] = -1;
    });
    const clear = Buffer.alloc(LENGTH_BYTES + stamps.byteLength);
    clear.writeUInt32LE(stamps.byteLength, 0);
    clear.set(new Uint8Array(stamps.buffer), LENGTH_BYTES);
    const sealing = this.box.sealing(clear);
    await writeFileAtomicAsync(
      this.file,
      async (handle) => {
        await handle.write(Buffer.concat([sealing.iv, clear]));
        let lines = `${JSON.stringify([snapshotTag(), token, dirStamp, this.workdirBase])}\n`;
        let previous: ConversationRecord | undefined;
        for (const { record } of entries) {
          lines += `${JSON.stringify(compactRecord(record, previous, this.workdirBase))}\n`;
          previous = record;
          if (lines.length < PIECE_BYTES) continue;
          await handle.write(sealing.update(Buffer.from(lines)));
          lines = '';
        }
        const last = sealing.update(Buffer.from(lines));
        const { rest, tag } = sealing.final();
        await handle.write(Buffer.concat([last, rest, tag]));
      },
      { mode: 0o600 },
    );
    this.discarding = undefined;
    return token;
  }
}

/**
 * What follows the iv in clear: the stamps' byte length, then the stamps, read into an array of
 * their own; `bytes` are both, as written (what the tag authenticates with the sealed lines).
 */
function readClear(fd: number, size: number): { bytes: Buffer; stamps: Float64Array } | null {
  const length = Buffer.alloc(LENGTH_BYTES);
  fs.readSync(fd, length, 0, LENGTH_BYTES, IV_BYTES);
  const stampBytes = length.readUInt32LE(0);
  if (stampBytes % Float64Array.BYTES_PER_ELEMENT !== 0 || IV_BYTES + LENGTH_BYTES + stampBytes + TAG_BYTES > size) return null;
  // The length just before an 8-byte boundary and the stamps after it: a Float64Array needs its bytes aligned.
  const area = new ArrayBuffer(8 + stampBytes);
  const bytes = Buffer.from(area, 8 - LENGTH_BYTES, LENGTH_BYTES + stampBytes);
  if (fs.readSync(fd, bytes, 0, bytes.length, IV_BYTES) !== bytes.length) return null;
  return { bytes, stamps: new Float64Array(area, 8, stampBytes / Float64Array.BYTES_PER_ELEMENT) };
}

interface Header {
  token: string;
  dirStamp: FileStamp | null;
  /** The workdir base and a slash: each workdir in it is this string and the id joined (one string of V8's each, not two). */
  workdirPrefix: string | null;
}

/** The first line: the tag of the server that wrote it, the save's token, the directory's stamp, the workdir base. */
function readHeader(text: string): Header {
  const [tag, token, dirStamp, workdirBase] = JSON.parse(text) as [unknown, unknown, unknown, unknown];
  if (tag !== snapshotTag() || typeof token !== 'string' || (workdirBase !== null && typeof workdirBase !== 'string')) throw new Error('written by another server version or record schema');
  return { token, dirStamp: Array.isArray(dirStamp) && dirStamp.length === 4 ? (dirStamp as unknown as FileStamp) : null, workdirPrefix: workdirBase === null ? null : `${workdirBase}/` };
}

/**
 * A record as its line holds it: the LLM config without its unset fields (most of its twenty), and
 * 0 in place of what most records hold alike: the tools when they are the previous line's, the
 * usage when it is all zero, the pending actions when there are none, the workdir when it is
 * `<workdir base>/<id>` (the base in the first line: a conversation without a workdir of its own).
 * Less to decrypt at the next start, and no array or object to parse for them, so a start is
 * ready sooner; the workdir's 0 makes the record lines shorter still, and a workdir is held as its
 * base and id joined (the base's text shared) rather than a text of its own.
 */
type CompactRecord = Omit<ConversationRecord, 'workdir' | 'llm' | 'tools' | 'usage' | 'pending_actions'> & {
  workdir: string | 0;
  llm: CompactLlmConfig | null;
  tools: ConversationRecord['tools'] | 0;
  usage: ConversationRecord['usage'] | 0;
  pending_actions: ConversationRecord['pending_actions'] | 0;
};

function compactRecord(record: ConversationRecord, previous: ConversationRecord | undefined, workdirBase: string | null): CompactRecord {
  return {
    ...record,
    // Each replaced where it is: the line's fields in the record's order, as its file's.
    workdir: workdirBase !== null && record.workdir === `${workdirBase}/${record.id}` ? 0 : record.workdir,
    llm: record.llm && withoutUnsetLlmFields(record.llm),
    tools: previous && sameList(record.tools, previous.tools) ? 0 : record.tools,
    usage: isZeroUsage(record.usage) ? 0 : record.usage,
    pending_actions: record.pending_actions.length === 0 ? 0 : record.pending_actions,
  };
}

/**
 * The record of a line (`previous`: the line before's; `workdirPrefix`: the first line's base, and a slash). A line
 * that says "the previous line's tools" first, or "in the workdir base" with none, is damage: the
 * snapshot is not used.
 */
function fullRecord(line: CompactRecord, previous: ConversationRecord | undefined, workdirPrefix: string | null): ConversationRecord {
  const record = line as unknown as ConversationRecord;
  if (line.workdir === 0) {
    if (workdirPrefix === null) throw new Error('a workdir in a workdir base the snapshot does not name');
    record.workdir = workdirPrefix + line.id;
  }
  if (line.llm) record.llm = normalizeLlmConfig(line.llm);
  if (line.tools === 0) {
    if (!previous) throw new Error('the first record names no tools');
    record.tools = previous.tools;
  }
  if (line.usage === 0) record.usage = zeroUsage();
  if (line.pending_actions === 0) record.pending_actions = [];
  return record;
}

/** Exactly what fullRecord gives back for a usage of 0: zeroUsage(). */
function isZeroUsage(usage: ConversationRecord['usage']): boolean {
  return usage.prompt_tokens === 0 && usage.completion_tokens === 0 && usage.cost === 0 && usage.cached_tokens === 0 && usage.reasoning_tokens === 0 && Object.keys(usage).length === 5;
}

let tag: string | undefined;
/**
 * The layout of the lines (2: with the log's stamp and event count, stamps with the ctime; 3: the
 * first line with the save's token, stamps as arrays of numbers; 4: the LLM config without its
 * unset fields; 5: the stamps of all records in the first line, with the directory's, each record
 * line the record alone; 6: 0 for the tools, usage and pending actions most records hold alike, see
 * CompactRecord; 7: the stamps in clear before the sealed lines, the workdir base in the first line
 * and 0 for a workdir in it).
 */
const FORMAT = 7;

/**
 * The version and the shape of the record schema (field names, types, defaults): a snapshot
 * holds records as this server parsed them, so a server whose schema differs reads the files.
 */
function snapshotTag(): string {
  // The stamps are the machine's own byte order: another order reads the files.
  return (tag ??= `${VERSION} ${FORMAT} ${os.endianness()} ${schemaShape(ConversationRecord)}`);
}
