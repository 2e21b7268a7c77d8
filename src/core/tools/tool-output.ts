/**
 * How a long tool output is cut for the model: its first and last lines are kept, and one marker
 * in between says which lines went and where the whole output is. The tool executor is the only
 * caller (one place caps every tool's output); the pieces here are pure, so they are unit-tested.
 */

/** Every tool's output past this many characters is cut in the middle for the model (its full text is saved). */
export const MAX_OBSERVATION_CHARS = 30_000;

/** A stretch that fell out of the middle of an output its producer could not hold whole (a command printing gigabytes). */
export interface OmittedStretch {
  /** Where in the held text it fell out. */
  at: number;
  chars: number;
  /** Line breaks among the characters that fell out. */
  newlines: number;
  /** Characters before `text[at]` on its line in the whole output (those that fell out included). */
  column: number;
}

/**
 * A tool's raw output inside its result (a command's): the executor caps this instead of the whole
 * content, so the notes the tool put around it are kept whole, and saves this when it is cut.
 */
export interface ToolOutput {
  /** The output as the tool holds it (the result's content shows it whole). */
  text: string;
  /** Set when a stretch fell out of `text`: the executor always marks it. */
  omitted?: OmittedStretch;
  /** The result's content with `shown` in place of the output. */
  frame(shown: string): string;
}

/** Where a cut starts or ends: a 1-based line, and the 1-based character in it (null: at the line's start or end). */
export interface CutEnd {
  line: number;
  character: number | null;
}

export interface OutputCut {
  /** What is kept of the start and of the end. */
  head: string;
  tail: string;
  /** The first and last lines that lost characters to the cut. */
  from: CutEnd;
  to: CutEnd;
  /** Lines of the whole output. */
  lines: number;
}

/**
 * Cuts the middle out of an output longer than `maxChars` (or one with a stretch already missing),
 * keeping about half of `maxChars` at each end. Cuts fall on line boundaries unless that would keep
 * less than half of an end's share (a line too long to show whole): then they fall inside the line.
 * null when the output fits.
 */
export function cutOutput(text: string, omitted: OmittedStretch | undefined, maxChars: number): OutputCut | null {
  if (!omitted && text.length <= maxChars) return null;
  const view = new HeldText(text, omitted);
  const half = Math.floor(maxChars / 2);
  const headLimit = Math.min(half, view.gapAt);
  const lastBreak = text.lastIndexOf('\n', headLimit - 1) + 1;
  const headEnd = lastBreak >= headLimit / 2 ? lastBreak : headLimit;
  const tailLimit = Math.max(text.length - half, omitted ? omitted.at : 0, headEnd);
  const nextLine = view.startsLine(tailLimit, 'tail') ? tailLimit : text.indexOf('\n', tailLimit) + 1 || text.length;
  const tailStart = text.length - nextLine >= (text.length - tailLimit) / 2 ? nextLine : tailLimit;
  const first = view.position(headEnd, 'head');
  const afterCut = view.position(tailStart, 'tail');
  return {
    head: text.slice(0, headEnd),
    tail: text.slice(tailStart),
    from: { line: first.line, character: view.startsLine(headEnd, 'head') ? null : first.column + 1 },
    to: view.startsLine(tailStart, 'tail') ? { line: afterCut.line - 1, character: null } : { line: afterCut.line, character: afterCut.column },
    lines: view.lines(),
  };
}

/** The marker put where the output was cut. `where`: the sentence saying where the whole output is. */
export function cutMarker(cut: OutputCut, where: string): string {
  const { from, to, lines } = cut;
  const total = `of ${count(lines)}`;
  if (from.character === null && to.character === null) {
    const range = from.line === to.line ? `line ${count(from.line)}` : `lines ${count(from.line)}-${count(to.line)}`;
    return `[${range} ${total} cut; ${where}]`;
  }
  if (from.line === to.line) {
    const end = to.character === null ? 'its end' : count(to.character);
    return `[characters ${count(from.character ?? 1)}-${end} of line ${count(from.line)} (${total}) cut: the line is too long to show whole; ${where}]`;
  }
  const start = from.character === null ? `the start of line ${count(from.line)}` : `character ${count(from.character)} of line ${count(from.line)}`;
  const end = to.character === null ? `the end of line ${count(to.line)}` : `character ${count(to.character)} of line ${count(to.line)}`;
  return `[cut from ${start} to ${end} (${total} lines): a line too long to show whole was cut inside; ${where}]`;
}

/** The cut text as shown: the head, the marker on a line of its own, the tail. */
export function joinCut(cut: OutputCut, where: string): string {
  return `${cut.head}${cut.head.endsWith('\n') ? '' : '\n'}${cutMarker(cut, where)}\n${cut.tail}`;
}

/** A marker of cutMarker on its own line (the secret masker masks the pieces on either side of it on their own). */
export const CUT_MARKER =
  /(\n\[(?:lines? [\d,]+(?:-[\d,]+)? of [\d,]+ cut; |characters [\d,]+-(?:[\d,]+|its end) of line [\d,]+ \(of [\d,]+\) cut: |cut from (?:the start of line|character) [\d,]+ )[^\n]*\]\n)/;

/** The text to save for a cut output: whole, or its two ends with a line saying what fell out between them. */
export function savedText(output: Pick<ToolOutput, 'text' | 'omitted'>): string {
  const { text, omitted } = output;
  if (!omitted) return text;
  const note = `[${count(omitted.chars)} characters (${count(omitted.newlines)} line breaks) of the output were not kept here: it was too long to keep whole]`;
  return `${text.slice(0, omitted.at)}\n${note}\n${text.slice(omitted.at)}`;
}

function count(n: number): string {
  return n.toLocaleString('en-US');
}

/** Line and column arithmetic over a held text, counting what fell out of it. */
class HeldText {
  /** Where the stretch fell out (the text's end when nothing did). */
  readonly gapAt: number;
  private readonly newlinesBeforeGap: number;

  constructor(
    private readonly text: string,
    private readonly omitted: OmittedStretch | undefined,
  ) {
    this.gapAt = omitted ? omitted.at : text.length;
    this.newlinesBeforeGap = newlinesIn(text, 0, this.gapAt);
  }

  /**
   * Whether the character at `index` starts a line of the whole output. Where the stretch fell
   * out, `head` asks about the stretch's first character and `tail` about the one after it.
   */
  startsLine(index: number, side: 'head' | 'tail'): boolean {
    if (index === 0) return true;
    if (this.omitted && index === this.gapAt && side === 'tail') return this.omitted.column === 0;
    return this.text[index - 1] === '\n';
  }

  /** The 1-based line of the character at `index`, and the characters before it on that line, in the whole output (`side` as in startsLine). */
  position(index: number, side: 'head' | 'tail'): { line: number; column: number } {
    const lineStart = index === 0 ? 0 : this.text.lastIndexOf('\n', index - 1) + 1;
    if (!this.omitted || index < this.gapAt || (index === this.gapAt && side === 'head')) {
      return { line: 1 + newlinesIn(this.text, 0, index), column: index - lineStart };
    }
    const line = 1 + this.newlinesBeforeGap + this.omitted.newlines + newlinesIn(this.text, this.gapAt, index);
    const column = lineStart > this.gapAt ? index - lineStart : this.omitted.column + (index - this.gapAt);
    return { line, column };
  }

  /** Lines of the whole output (a last line break does not start another). */
  lines(): number {
    const newlines = newlinesIn(this.text, 0, this.text.length) + (this.omitted?.newlines ?? 0);
    return 1 + newlines - (this.text.endsWith('\n') ? 1 : 0);
  }
}

function newlinesIn(text: string, from: number, to: number): number {
  let found = 0;
  for (let at = text.indexOf('\n', from); at !== -1 && at < to; at = text.indexOf('\n', at + 1)) found++;
  return found;
}
