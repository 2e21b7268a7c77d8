import { EVENT_KINDS, type EventKind, type EventSource } from '../../../core/schemas/event.js';

/**
 * One fixed-width record per event in `events.idx`, so that seq N is found at byte (N-1)*32
 * without reading the log:
 *   0..6   byte offset of the JSON line in events.jsonl (48-bit)
 *   6..10  line length in bytes, newline excluded (32-bit)
 *   10     kind code, 11 source code
 *   12..20 timestamp, ms since epoch (float64)
 *   20..28 first 8 bytes of the event id (for lookups by id)
 *   28..32 reserved
 */
export const ENTRY_SIZE = 32;

const SOURCES: readonly EventSource[] = ['user', 'agent', 'environment', 'system'];

export interface IndexEntry {
  offset: number;
  length: number;
  kind: number;
  source: number;
  timestampMs: number;
  idPrefix: Buffer;
}

export function kindCode(kind: EventKind): number {
  return EVENT_KINDS.indexOf(kind) + 1;
}

export function sourceCode(source: EventSource): number {
  return SOURCES.indexOf(source) + 1;
}

export function idPrefixOf(id: string): Buffer {
  return Buffer.from(id.replace(/-/g, '').slice(0, 16), 'hex');
}

export function encodeEntry(entry: IndexEntry, target: Buffer = Buffer.alloc(ENTRY_SIZE), at = 0): Buffer {
  target.writeUIntLE(entry.offset, at, 6);
  target.writeUInt32LE(entry.length, at + 6);
  target.writeUInt8(entry.kind, at + 10);
  target.writeUInt8(entry.source, at + 11);
  target.writeDoubleLE(entry.timestampMs, at + 12);
  entry.idPrefix.copy(target, at + 20, 0, 8);
  return target;
}

export function decodeEntry(buffer: Buffer, at: number): IndexEntry {
  return {
    offset: buffer.readUIntLE(at, 6),
    length: buffer.readUInt32LE(at + 6),
    kind: buffer.readUInt8(at + 10),
    source: buffer.readUInt8(at + 11),
    timestampMs: buffer.readDoubleLE(at + 12),
    idPrefix: buffer.subarray(at + 20, at + 28),
  };
}
