import fs from 'node:fs';

/**
 * `firehose.idx`: one 20-byte record per appended event, in global append order
 * (16 bytes conversation id, 4 bytes seq). Record N (1-based) is global cursor N.
 */
const RECORD_SIZE = 20;

export interface FirehoseRecord {
  globalCursor: number;
  conversationId: string;
  seq: number;
}

function uuidToBytes(id: string, target: Buffer): void {
  Buffer.from(id.replace(/-/g, ''), 'hex').copy(target, 0, 0, 16);
}

function bytesToUuid(buffer: Buffer, at: number): string {
  const hex = buffer.toString('hex', at, at + 16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export class FirehoseIndex {
  private count: number;

  private constructor(
    private readonly fd: number,
    private readonly fsync: boolean,
  ) {
    const size = fs.fstatSync(fd).size;
    this.count = Math.floor(size / RECORD_SIZE);
    if (this.count * RECORD_SIZE !== size) fs.ftruncateSync(fd, this.count * RECORD_SIZE);
  }

  static open(file: string, options: { fsync: boolean }): FirehoseIndex {
    return new FirehoseIndex(fs.openSync(file, 'a+'), options.fsync);
  }

  get head(): number {
    return this.count;
  }

  append(conversationId: string, seq: number): number {
    const record = Buffer.alloc(RECORD_SIZE);
    uuidToBytes(conversationId, record);
    record.writeUInt32LE(seq, 16);
    try {
      let written = 0;
      while (written < RECORD_SIZE) written += fs.writeSync(this.fd, record, written, RECORD_SIZE - written);
      if (this.fsync) fs.fsyncSync(this.fd);
    } catch (error) {
      fs.ftruncateSync(this.fd, this.count * RECORD_SIZE);
      throw error;
    }
    this.count += 1;
    return this.count;
  }

  /** Records with cursor > afterCursor, at most `limit` of them. */
  read(afterCursor: number, limit: number): FirehoseRecord[] {
    const first = Math.max(0, afterCursor);
    const n = Math.min(limit, this.count - first);
    if (n <= 0) return [];
    const buffer = Buffer.allocUnsafe(n * RECORD_SIZE);
    const read = fs.readSync(this.fd, buffer, 0, buffer.length, first * RECORD_SIZE);
    const records: FirehoseRecord[] = [];
    for (let at = 0; at + RECORD_SIZE <= read; at += RECORD_SIZE) {
      records.push({
        globalCursor: first + at / RECORD_SIZE + 1,
        conversationId: bytesToUuid(buffer, at),
        seq: buffer.readUInt32LE(at + 16),
      });
    }
    return records;
  }

  close(): void {
    fs.closeSync(this.fd);
  }
}
