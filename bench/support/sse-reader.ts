/**
 * A cheap SSE reader for load generators (P2 holds 1,000 streams in one process): an HTTP/1.1
 * response read from a raw socket as bytes, its chunked body decoded, and the stream's frames
 * scanned for their `id:` lines without decoding text or parsing JSON. Every id is still seen,
 * in order: the caller checks each one.
 */

const NL = 0x0a;
const FRAME_END = Buffer.from('\n\n');
const NOTICE = 'event: stream_';
const HEAD_END = Buffer.from('\r\n\r\n');

export interface SseReaderEvents {
  /** An `id:` line's cursor, in stream order. */
  onId(id: number): void;
  /** Something that is not a clean stream: a bad status, a malformed line, a `stream_*` notice. */
  onFault(fault: string): void;
}

/**
 * An SSE body, pushed in arbitrary pieces: each frame's first line is looked at (`id:` lines
 * and `event: stream_*` notices are reported), then the scan jumps to the blank line ending it.
 */
export class SseLineScanner {
  /** The unfinished last line of the previous piece. */
  private carry: Buffer | null = null;

  constructor(private readonly events: SseReaderEvents) {}

  push(piece: Buffer): void {
    const lastNl = piece.lastIndexOf(NL);
    if (lastNl === -1) {
      this.carry = this.carry ? Buffer.concat([this.carry, piece]) : Buffer.from(piece);
      return;
    }
    let from = 0;
    if (this.carry) {
      // The line cut by the previous piece, whole, looked at alone: it may start a frame.
      const firstNl = piece.indexOf(NL);
      const line = Buffer.concat([this.carry, piece.subarray(0, firstNl + 1)]);
      this.carry = null;
      this.firstLine(line, 0);
      from = firstNl + 1;
    }
    this.frames(piece, from, lastNl + 1);
    if (lastNl + 1 < piece.length) this.carry = Buffer.from(piece.subarray(lastNl + 1));
  }

  /** Whole lines in buf[start, end): `start` begins a line and buf[end - 1] is the buffer's last newline. */
  private frames(buf: Buffer, start: number, end: number): void {
    let at = start;
    while (at < end) {
      // A blank line ends a frame: the next line starts one.
      if (buf[at] === NL) {
        at += 1;
        continue;
      }
      this.firstLine(buf, at);
      const frameEnd = buf.indexOf(FRAME_END, at);
      if (frameEnd === -1) return;
      at = frameEnd + 2;
    }
  }

  /** A line that may start a frame (or a frame's later line, when a piece began inside a frame: neither prefix matches then). */
  private firstLine(buf: Buffer, at: number): void {
    if (buf[at] === 0x69 /* i */ && buf[at + 1] === 0x64 && buf[at + 2] === 0x3a && buf[at + 3] === 0x20) this.id(buf, at + 4);
    else if (buf[at] === 0x65 /* e */ && buf.toString('latin1', at, at + NOTICE.length) === NOTICE) this.events.onFault(buf.toString('latin1', at + 7, buf.indexOf(NL, at)));
  }

  /** The decimal digits from `at` to the end of the line. */
  private id(buf: Buffer, at: number): void {
    let value = 0;
    let digits = 0;
    for (let i = at; ; i++) {
      const c = buf[i]!;
      if (c === NL) break;
      if (c < 0x30 || c > 0x39 || ++digits > 15) return this.events.onFault(`bad id line: ${buf.toString('latin1', at, buf.indexOf(NL, at))}`);
      value = value * 10 + (c - 0x30);
    }
    if (digits === 0) return this.events.onFault('empty id line');
    this.events.onId(value);
  }
}

/** An HTTP/1.1 chunked body, pushed in arbitrary pieces: the chunks' data handed on in pieces. */
export class ChunkedDecoder {
  private state: 'size' | 'extension' | 'data' | 'cr' | 'lf' = 'size';
  private size = 0;
  private digits = 0;
  private remaining = 0;
  ended = false;

  constructor(
    private readonly out: (piece: Buffer) => void,
    private readonly onFault: (fault: string) => void,
  ) {}

  push(buf: Buffer): void {
    let i = 0;
    while (i < buf.length && !this.ended) {
      if (this.state === 'data') {
        const n = Math.min(this.remaining, buf.length - i);
        this.out(buf.subarray(i, i + n));
        i += n;
        this.remaining -= n;
        if (this.remaining === 0) this.state = 'cr';
        continue;
      }
      // The few bytes around the data: the size line (hex digits, an optional extension, CRLF) and the CRLF after the data.
      const c = buf[i++]!;
      if (this.state === 'cr' || this.state === 'lf') {
        if (c !== (this.state === 'cr' ? 0x0d : NL)) return this.fail(`byte ${c} after a chunk's data`);
        this.state = this.state === 'cr' ? 'lf' : 'size';
      } else if (c === NL) this.sizeDone();
      else if (this.state === 'size') {
        const digit = hexDigit(c);
        if (digit >= 0 && this.digits < 12) {
          this.size = this.size * 16 + digit;
          this.digits += 1;
        } else if (c === 0x3b /* ; */ || c === 0x0d) this.state = 'extension';
        else return this.fail(`byte ${c} in a chunk size`);
      }
    }
  }

  private sizeDone(): void {
    if (this.digits === 0) return this.fail('empty chunk size');
    if (this.size === 0) this.ended = true;
    else {
      this.remaining = this.size;
      this.state = 'data';
    }
    this.size = 0;
    this.digits = 0;
  }

  private fail(fault: string): void {
    this.ended = true;
    this.onFault(fault);
  }
}

function hexDigit(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  return -1;
}

/**
 * A response read from a socket: its head (status 200 expected), then the body, chunked or not,
 * scanned for ids. `push` every 'data' chunk of the socket; `headDone` resolves once the head is in.
 */
export class SseResponseReader {
  private head: Buffer | null = Buffer.alloc(0);
  private body: ((piece: Buffer) => void) | null = null;
  private readonly scanner: SseLineScanner;

  constructor(
    private readonly events: SseReaderEvents,
    private readonly onHead: (status: number) => void,
  ) {
    this.scanner = new SseLineScanner(events);
  }

  push(chunk: Buffer): void {
    if (this.body) return this.body(chunk);
    this.head = Buffer.concat([this.head!, chunk]);
    const end = this.head.indexOf(HEAD_END);
    if (end === -1) return;
    const text = this.head.toString('latin1', 0, end);
    const rest = this.head.subarray(end + HEAD_END.length);
    this.head = null;
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0);
    const chunked = /\r\ntransfer-encoding:\s*chunked\s*(\r\n|$)/i.test(text);
    if (chunked) {
      const decoder = new ChunkedDecoder((piece) => this.scanner.push(piece), (fault) => this.events.onFault(fault));
      this.body = (piece) => decoder.push(piece);
    } else this.body = (piece) => this.scanner.push(piece);
    this.onHead(status);
    if (rest.length > 0) this.body(rest);
  }
}
