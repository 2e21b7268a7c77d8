import type { OmittedStretch } from '../../core/tools/tool-output.js';

/** What a window held of an output: all of it, or its start and end with the stretch between them counted. */
export interface HeldOutput {
  text: string;
  omitted?: OmittedStretch;
}

/**
 * Keeps the first and last halves of a stream of text within `limit` characters and counts what
 * fell out of the middle (characters, line breaks, and where the tail's first line began), so a
 * command printing gigabytes costs bounded memory and its cut can still be told in lines.
 */
export class OutputWindow {
  private head = '';
  /** The tail as appended, oldest first: whole chunks drop off the front, so a long stream is not copied at every append. */
  private tail: string[] = [];
  private tailLength = 0;
  private omittedChars = 0;
  private omittedNewlines = 0;
  /** Characters since the last line break in everything appended: the column of the next character. */
  private column = 0;
  /** The column of the tail's first character. */
  private tailColumn = 0;

  constructor(private readonly limit: number) {}

  append(text: string): void {
    if (text === '') return;
    const headLimit = Math.floor(this.limit / 2);
    let rest = text;
    if (this.head.length < headLimit) {
      const room = headLimit - this.head.length;
      this.head += rest.slice(0, room);
      this.column = advance(this.column, rest.slice(0, room));
      rest = rest.slice(room);
    }
    if (rest === '') return;
    if (this.tailLength === 0) this.tailColumn = this.column;
    this.tail.push(rest);
    this.tailLength += rest.length;
    this.column = advance(this.column, rest);
    this.trim(false);
  }

  /** Everything since the last take: whole, or its two ends and what fell out between them. */
  take(): HeldOutput {
    this.trim(true);
    const text = this.head + this.tail.join('');
    const held: HeldOutput =
      this.omittedChars > 0 ? { text, omitted: { at: this.head.length, chars: this.omittedChars, newlines: this.omittedNewlines, column: this.tailColumn } } : { text };
    this.head = '';
    this.tail = [];
    this.tailLength = 0;
    this.omittedChars = 0;
    this.omittedNewlines = 0;
    this.column = 0;
    this.tailColumn = 0;
    return held;
  }

  /** Drops the tail's oldest text past its share: whole chunks as they age out, and at a take (`exact`) to the character. */
  private trim(exact: boolean): void {
    const tailLimit = this.limit - Math.floor(this.limit / 2);
    while (this.tail.length > 1 && this.tailLength - this.tail[0]!.length >= tailLimit) this.drop(this.tail.shift()!);
    // One chunk longer than the whole share (or a take) is cut inside.
    if (this.tailLength > (exact ? tailLimit : 2 * tailLimit)) {
      const first = this.tail[0]!;
      const excess = this.tailLength - tailLimit;
      this.drop(first.slice(0, excess));
      this.tail[0] = first.slice(excess);
    }
  }

  private drop(piece: string): void {
    this.omittedChars += piece.length;
    this.tailLength -= piece.length;
    for (let at = piece.indexOf('\n'); at !== -1; at = piece.indexOf('\n', at + 1)) this.omittedNewlines++;
    this.tailColumn = advance(this.tailColumn, piece);
  }
}

/** The column after `piece`, starting at `column`. */
function advance(column: number, piece: string): number {
  const lastBreak = piece.lastIndexOf('\n');
  return lastBreak === -1 ? column + piece.length : piece.length - lastBreak - 1;
}

/** Held output as one text, a cut marked by its size in characters (the commands API, and text put into another window). */
export function markedText(held: HeldOutput): string {
  if (!held.omitted) return held.text;
  const { at, chars } = held.omitted;
  return `${held.text.slice(0, at)}\n[... ${chars} characters truncated ...]\n${held.text.slice(at)}`;
}

/** Appends a bracketed note to output on a line of its own. */
export function joinOutput(output: string, note: string): string {
  if (note === '') return output;
  if (output === '') return note;
  return output.endsWith('\n') ? `${output}${note}` : `${output}\n${note}`;
}
