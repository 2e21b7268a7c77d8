import fs from 'node:fs';
import path from 'node:path';
import { DamagedDataError } from '../../../core/errors.js';
import type { AgentEvent } from '../../../core/schemas/event.js';
import { ENTRY_SIZE, decodeEntry, encodeEntry, idPrefixOf, kindCode, sourceCode } from './index-entry.js';
import { readAt } from './whole-io.js';

const CHUNK = 1 << 20;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const NEWLINE = 0x0a;

export interface LogState {
  count: number;
  logSize: number;
  lastTimestampMs: number;
}

/** Where every line of the log is: its byte offset and length (newline excluded). */
interface LineSpans {
  offsets: number[];
  lengths: number[];
  /** Index of the first line that is not shaped like a JSON object, or -1. */
  firstMisshapen: number;
  /** Offset after the last newline: bytes past it are a torn last line. */
  end: number;
}

function scanLines(logFd: number, logSize: number): LineSpans {
  const spans: LineSpans = { offsets: [], lengths: [], firstMisshapen: -1, end: 0 };
  const buffer = Buffer.allocUnsafe(Math.max(1, Math.min(CHUNK, logSize)));
  let lineStart = 0;
  let firstByte = -1;
  let previousByte = -1;
  for (let position = 0; position < logSize; ) {
    const n = fs.readSync(logFd, buffer, 0, Math.min(CHUNK, logSize - position), position);
    if (n === 0) break;
    for (let i = 0; i < n; i++) {
      const byte = buffer[i]!;
      if (firstByte === -1) firstByte = byte;
      if (byte === NEWLINE) {
        const at = position + i;
        if (spans.firstMisshapen === -1 && (firstByte !== OPEN_BRACE || previousByte !== CLOSE_BRACE)) spans.firstMisshapen = spans.offsets.length;
        spans.offsets.push(lineStart);
        spans.lengths.push(at - lineStart);
        lineStart = at + 1;
        firstByte = -1;
      }
      previousByte = byte;
    }
    position += n;
  }
  spans.end = lineStart;
  return spans;
}

/**
 * Open-time check of a conversation's log against its index, reading the whole log once:
 * - a torn last line (a crash mid-append) is cut off: it was never acknowledged;
 * - index entries that disagree with the log's lines are rebuilt from the log (the log is the truth);
 * - any other line that is not a complete JSON event with the next seq is damage: DamagedDataError
 *   naming the file and line, and nothing is written (the files stay as found, for inspection).
 */
export function verifyLog(options: { logFd: number; indexFd: number; dir: string }): LogState {
  const { logFd, indexFd, dir } = options;
  const logFile = path.join(dir, 'events.jsonl');
  const damaged = (line: number, reason: string) => new DamagedDataError({ file: 'events.jsonl', line, reason }, logFile);
  const logSize = fs.fstatSync(logFd).size;
  const spans = scanLines(logFd, logSize);
  let lines = spans.offsets.length;

  const indexSize = fs.fstatSync(indexFd).size;
  const indexCount = Math.floor(indexSize / ENTRY_SIZE);
  // Index entries that match the log's lines, from the start.
  let matching = 0;
  const limit = Math.min(indexCount, lines);
  for (let first = 0; first < limit && matching === first; first += 4096) {
    const n = Math.min(4096, limit - first);
    const buffer = readAt(indexFd, n * ENTRY_SIZE, first * ENTRY_SIZE);
    for (let i = 0; i < n; i++) {
      const entry = decodeEntry(buffer, i * ENTRY_SIZE);
      if (entry.offset !== spans.offsets[first + i] || entry.length !== spans.lengths[first + i]) break;
      matching += 1;
    }
  }

  if (spans.firstMisshapen !== -1) {
    // Only an unindexed last line can be crash damage (a write cut short); anything else is not.
    const isTornTail = spans.firstMisshapen === lines - 1 && spans.firstMisshapen >= matching && spans.end === logSize;
    if (!isTornTail) throw damaged(spans.firstMisshapen + 1, 'not a complete JSON event');
    lines -= 1;
    spans.end = spans.offsets[lines]!;
  }

  // Lines the index lacks (or got wrong) are parsed and indexed; each must carry the next seq.
  const entries: Buffer[] = [];
  let lastTimestampMs = matching > 0 ? decodeEntry(readAt(indexFd, ENTRY_SIZE, (matching - 1) * ENTRY_SIZE), 0).timestampMs : 0;
  let validLines = lines;
  for (let i = matching; i < lines; i++) {
    const text = readAt(logFd, spans.lengths[i]!, spans.offsets[i]!).toString('utf8');
    let event: AgentEvent | undefined;
    try {
      event = JSON.parse(text) as AgentEvent;
    } catch {
      event = undefined;
    }
    if (!event || event.seq !== i + 1) {
      if (i === lines - 1 && i >= indexCount) {
        validLines = i;
        spans.end = spans.offsets[i]!;
        break;
      }
      throw damaged(i + 1, event ? `seq ${String(event.seq)} where ${i + 1} was expected` : 'not valid JSON');
    }
    lastTimestampMs = Date.parse(event.timestamp);
    entries.push(encodeEntry({ offset: spans.offsets[i]!, length: spans.lengths[i]!, kind: kindCode(event.kind), source: sourceCode(event.source), timestampMs: lastTimestampMs, idPrefix: idPrefixOf(event.id) }));
  }

  // Checked: now repair (the derived index, and a torn tail of the log).
  if (indexSize !== matching * ENTRY_SIZE) fs.ftruncateSync(indexFd, matching * ENTRY_SIZE);
  if (entries.length > 0) {
    const all = Buffer.concat(entries);
    let written = 0;
    while (written < all.length) written += fs.writeSync(indexFd, all, written, all.length - written);
  }
  if (spans.end < logSize) fs.ftruncateSync(logFd, spans.end);
  return { count: validLines, logSize: spans.end, lastTimestampMs };
}
