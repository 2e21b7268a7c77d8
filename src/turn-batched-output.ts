import fs from 'node:fs';

/** Bytes held for the turn's lines at first; more is taken as needed and given back after a large turn. */
const INITIAL_BYTES = 64 * 1024;
/** Pieces up to this length are copied character by character (cheaper than a call into Buffer's encoder). */
const SHORT_PIECE = 64;

/**
 * Standard output, written once per event-loop turn: the lines a turn logs (under load, those of
 * many requests) go out in one write(2) when it ends, instead of one system call each. A line
 * waits at most until the end of its turn; what is pending when the process exits (an uncaught
 * error included) is written then. Writes are synchronous, as before: a reader that stops
 * reading holds the server back rather than letting lines pile up in memory.
 *
 * Lines are encoded as they come into one buffer kept from turn to turn. A line may also be
 * handed over in pieces (`append`, then `endLine`): the request line (http/request-log-line.ts)
 * is written that way, without a string for the whole line or for its pieces put together.
 */
export class TurnBatchedOutput {
  private bytes = Buffer.allocUnsafe(INITIAL_BYTES);
  private used = 0;
  private scheduled = false;
  private readonly flushAtTurnEnd = () => this.flushSync();

  constructor(private readonly fd: number) {
    process.on('exit', () => this.flushSync());
  }

  /** A whole line (ending with its newline), as pino writes it. */
  write(line: string): boolean {
    this.append(line);
    this.endLine();
    return true;
  }

  /** A piece of the line being written: nothing is written out before its `endLine`'s turn ends. */
  append(piece: string): void {
    const length = piece.length;
    // UTF-8 takes at most 3 bytes per UTF-16 unit.
    if (this.used + length * 3 > this.bytes.length) this.grow(this.used + length * 3);
    if (length > SHORT_PIECE) {
      this.used += this.bytes.write(piece, this.used, 'utf8');
      return;
    }
    const bytes = this.bytes;
    let used = this.used;
    for (let i = 0; i < length; i++) {
      const code = piece.charCodeAt(i);
      if (code >= 0x80) {
        this.used = used + bytes.write(piece.slice(i), used, 'utf8');
        return;
      }
      bytes[used++] = code;
    }
    this.used = used;
  }

  /** The line is complete: it goes out when this turn ends. */
  endLine(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(this.flushAtTurnEnd);
  }

  flushSync(): void {
    this.scheduled = false;
    const length = this.used;
    if (length === 0) return;
    this.used = 0;
    for (let written = 0; written < length; ) {
      try {
        written += fs.writeSync(this.fd, this.bytes, written, length - written);
      } catch (error) {
        // A full pipe (non-blocking stdout): wait for the reader, as a synchronous write would.
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') break;
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
      }
    }
    if (this.bytes.length > 16 * INITIAL_BYTES) this.bytes = Buffer.allocUnsafe(INITIAL_BYTES);
  }

  private grow(needed: number): void {
    let size = this.bytes.length * 2;
    while (size < needed) size *= 2;
    const bigger = Buffer.allocUnsafe(size);
    this.bytes.copy(bigger, 0, 0, this.used);
    this.bytes = bigger;
  }
}
