import fs from 'node:fs';

/** Bytes held for the turn's lines at first; more is taken as needed and given back after a large turn. */
const INITIAL_BYTES = 64 * 1024;
/** Pieces up to this length are copied character by character (cheaper than a call into Buffer's encoder). */
const SHORT_PIECE = 64;
/** Past this many bytes pending, lines go out at the end of the turn, whatever the flush window. */
const FLUSH_BYTES = 32 * 1024;
/** How pino starts a line: the level's number follows. */
const LEVEL_PREFIX = '{"level":';
/** pino's `warn`: lines at this level and above are never held past their turn. */
const WARN = 40;

/**
 * A line kept as its fields until its bytes are needed, then encoded straight into the buffer:
 * at most `maxBytes` of them, written by `encode` at `at` in `bytes`, returning where they end.
 */
export interface EncodedLine {
  readonly maxBytes: number;
  encode(bytes: Buffer, at: number): number;
}

/** Lines kept as fields at most: past this many, they are encoded into the buffer. */
const MAX_KEPT_LINES = 256;

/**
 * Standard output, written once per event-loop turn, or once per flush window: the lines a turn
 * logs (under load, those of many requests) go out in one write(2) when it ends, instead of one
 * system call each. With a flush window (AGENTD_LOG_FLUSH_MS), a line below `warn` (a request's
 * line) may wait up to that long for others to go out with it, as nginx's `access_log ...
 * buffer= flush=` does: a busy server then makes one write(2) per window rather than one per
 * turn (P5: on `/alive` that write was most of what agentd costs over a bare route). A line at
 * `warn` or above goes out at the end of its turn, with everything pending before it; so does
 * everything once FLUSH_BYTES are pending. What is pending when the process exits (a clean stop,
 * an uncaught error) is written then; a `kill -9` loses at most one window of lines below `warn`.
 * Writes are synchronous, as before: a reader that stops reading holds the server back rather
 * than letting lines pile up in memory.
 *
 * Lines are encoded as they come into one buffer kept from turn to turn. A line may also be
 * handed over in pieces (`append`, then `endLine`), or as an EncodedLine (`writeLater`: the
 * request line, http/request-log-line.ts, known to be below `warn`): kept as its fields and
 * encoded with the others kept when the buffer is written out, or before any other line is added
 * (the order of lines stays the order they came in): a window's request lines are encoded
 * together, in one loop, rather than one at a time between requests.
 */
export class TurnBatchedOutput {
  private bytes = Buffer.allocUnsafe(INITIAL_BYTES);
  private used = 0;
  /** Lines written later (writeLater), in order, not yet encoded into `bytes`. */
  private kept: EncodedLine[] = [];
  private scheduled = false;
  private readonly flushAtTurnEnd = () => this.flushSync();
  /** Armed by the first line of a window (one Timeout, re-armed with refresh()); never keeps the process alive. */
  private windowTimer: NodeJS.Timeout | null = null;
  private windowArmed = false;
  private readonly flushAtWindowEnd = () => {
    this.windowArmed = false;
    this.flushSync();
  };

  /** `flushMs`: the flush window for lines below `warn` (0: each line goes out at the end of its turn). */
  constructor(
    private readonly fd: number,
    private flushMs = 0,
  ) {
    process.on('exit', () => this.flushSync());
  }

  setFlushWindow(ms: number): void {
    if (ms === this.flushMs) return;
    // The timer was made for the old window: what waits on it goes out now.
    this.flushSync();
    if (this.windowTimer) clearTimeout(this.windowTimer);
    this.windowTimer = null;
    this.windowArmed = false;
    this.flushMs = ms;
  }

  /** A whole line (ending with its newline), as pino writes it. */
  write(line: string): boolean {
    this.append(line);
    this.endLine(isUrgent(line));
    return true;
  }

  /** A piece of the line being written: nothing is written out before its `endLine`'s turn ends. */
  append(piece: string): void {
    if (this.kept.length > 0) this.encodeKept();
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

  /** A line below `warn`, encoded into the buffer by `line` itself when its bytes are needed. */
  writeLater(line: EncodedLine): void {
    if (this.kept.push(line) >= MAX_KEPT_LINES) this.encodeKept();
    this.endLine();
  }

  private encodeKept(): void {
    const kept = this.kept;
    this.kept = [];
    let room = 0;
    for (const line of kept) room += line.maxBytes;
    if (this.used + room > this.bytes.length) this.grow(this.used + room);
    const bytes = this.bytes;
    let used = this.used;
    for (const line of kept) used = line.encode(bytes, used);
    this.used = used;
  }

  /** The line is complete: it goes out when this turn ends (`urgent`, or without a flush window), else within the window. */
  endLine(urgent = false): void {
    if (urgent || this.flushMs === 0 || this.used >= FLUSH_BYTES) {
      if (this.scheduled) return;
      this.scheduled = true;
      setImmediate(this.flushAtTurnEnd);
      return;
    }
    if (this.windowArmed) return;
    this.windowArmed = true;
    if (this.windowTimer) this.windowTimer.refresh();
    else this.windowTimer = setTimeout(this.flushAtWindowEnd, this.flushMs).unref();
  }

  flushSync(): void {
    this.scheduled = false;
    if (this.kept.length > 0) this.encodeKept();
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

/** Whether a whole line must go out at the end of its turn: pino's at `warn` and above, and any line not of pino's form. */
function isUrgent(line: string): boolean {
  if (!line.startsWith(LEVEL_PREFIX)) return true;
  let level = 0;
  for (let i = LEVEL_PREFIX.length; i < line.length; i++) {
    const digit = line.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) break;
    level = level * 10 + digit;
  }
  return level >= WARN;
}
