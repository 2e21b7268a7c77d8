/** Bounded command output as the LLM will read it. */

/**
 * Keeps the first and last halves of a stream of text within `limit` characters and counts what
 * fell out of the middle, so a command printing gigabytes costs bounded memory.
 */
export class OutputWindow {
  private head = '';
  private tail = '';
  private dropped = 0;
  /** Everything since the last take, up to `keepFull` characters, for when the window cuts. */
  private full: string[] = [];
  private fullLength = 0;

  constructor(
    private readonly limit: number,
    private readonly keepFull = 0,
  ) {}

  append(text: string): void {
    if (this.fullLength < this.keepFull) {
      const piece = text.slice(0, this.keepFull - this.fullLength);
      this.full.push(piece);
      this.fullLength += piece.length;
    }
    const headLimit = Math.floor(this.limit / 2);
    let rest = text;
    if (this.head.length < headLimit) {
      const room = headLimit - this.head.length;
      this.head += rest.slice(0, room);
      rest = rest.slice(room);
    }
    if (rest === '') return;
    this.tail += rest;
    const tailLimit = this.limit - headLimit;
    if (this.tail.length > tailLimit) {
      this.dropped += this.tail.length - tailLimit;
      this.tail = this.tail.slice(this.tail.length - tailLimit);
    }
  }

  /** Everything since the last take, cut in the middle with a marker if it went past the limit. */
  take(): { text: string; truncated: boolean; full?: { text: string; complete: boolean } } {
    const truncated = this.dropped > 0;
    const text = truncated ? `${this.head}\n[... ${this.dropped} characters truncated ...]\n${this.tail}` : this.head + this.tail;
    const total = this.head.length + this.dropped + this.tail.length;
    const full = truncated && this.keepFull > 0 ? { text: this.full.join(''), complete: this.fullLength >= total } : undefined;
    this.head = '';
    this.tail = '';
    this.dropped = 0;
    this.full = [];
    this.fullLength = 0;
    return full ? { text, truncated, full } : { text, truncated };
  }
}

/** Appends a bracketed note to output on a line of its own. */
export function joinOutput(output: string, note: string): string {
  if (note === '') return output;
  if (output === '') return note;
  return output.endsWith('\n') ? `${output}${note}` : `${output}\n${note}`;
}
