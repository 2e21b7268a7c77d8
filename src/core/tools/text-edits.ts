/** Pure text helpers for file_editor: line numbering, unique replacement, insertion, snippets. */

export const MAX_DISPLAYED_LINE_CHARS = 2000;

/** Lines of `text` without the empty string after a final newline ('' → []). */
export function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** `cat -n` style: right-aligned number, a tab, the line (long lines cut with a marker). */
export function formatNumberedLine(line: string, lineNumber: number): string {
  const content = line.endsWith('\r') ? line.slice(0, -1) : line;
  const shown = content.length > MAX_DISPLAYED_LINE_CHARS
    ? `${content.slice(0, MAX_DISPLAYED_LINE_CHARS)} …[line truncated, ${content.length} chars]`
    : content;
  return `${String(lineNumber).padStart(6)}\t${shown}`;
}

export function numberLines(lines: readonly string[], firstLineNumber: number): string {
  return lines.map((line, index) => formatNumberedLine(line, firstLineNumber + index)).join('\n');
}

/** Start indexes of the non-overlapping occurrences of `needle`. */
export function findOccurrences(text: string, needle: string): number[] {
  const found: number[] = [];
  if (needle === '') return found;
  for (let index = text.indexOf(needle); index !== -1; index = text.indexOf(needle, index + needle.length)) {
    found.push(index);
  }
  return found;
}

/** 1-based line number of a character index. */
export function lineNumberAt(text: string, index: number): number {
  let line = 1;
  for (let position = text.indexOf('\n'); position !== -1 && position < index; position = text.indexOf('\n', position + 1)) line++;
  return line;
}

/**
 * Where `needle` would match if indentation and runs of whitespace were ignored (line by line):
 * the 1-based line numbers of such near-matches, for a helpful error.
 */
export function findWhitespaceInsensitiveMatches(text: string, needle: string): number[] {
  const normalize = (line: string) => line.trim().replace(/\s+/g, ' ');
  const needleLines = splitLines(needle).map(normalize);
  while (needleLines.length > 0 && needleLines[0] === '') needleLines.shift();
  while (needleLines.length > 0 && needleLines[needleLines.length - 1] === '') needleLines.pop();
  if (needleLines.length === 0) return [];
  const textLines = splitLines(text).map(normalize);
  const matches: number[] = [];
  for (let start = 0; start + needleLines.length <= textLines.length; start++) {
    const first = textLines[start] as string;
    if (needleLines.length === 1) {
      if (first.includes(needleLines[0] as string)) matches.push(start + 1);
      continue;
    }
    if (!first.endsWith(needleLines[0] as string)) continue;
    const rest = needleLines.slice(1);
    const lastIndex = rest.length - 1;
    const ok = rest.every((line, offset) => {
      const candidate = textLines[start + 1 + offset] as string;
      return offset === lastIndex ? candidate.startsWith(line) : candidate === line;
    });
    if (ok) matches.push(start + 1);
  }
  return matches;
}

/** Inserts `newText` (made to end with a newline) after line `afterLine` (0 = top). */
export function insertAfterLine(text: string, afterLine: number, newText: string): { text: string; firstLine: number; lastLine: number } {
  const newline = text.includes('\r\n') ? '\r\n' : '\n';
  let block = newline === '\r\n' ? newText.replace(/\r?\n/g, '\r\n') : newText;
  if (!block.endsWith('\n')) block += newline;
  let offset = 0;
  let prefix = '';
  for (let line = 0; line < afterLine; line++) {
    const next = text.indexOf('\n', offset);
    if (next === -1) {
      offset = text.length;
      prefix = newline; // the last line had no newline: end it before appending
      break;
    }
    offset = next + 1;
  }
  const insertedLines = splitLines(block).length;
  return {
    text: text.slice(0, offset) + prefix + block + text.slice(offset),
    firstLine: afterLine + 1,
    lastLine: afterLine + Math.max(insertedLines, 1),
  };
}

/** Numbered lines around [startLine, endLine] (1-based) with `context` lines either side. */
export function snippetAround(text: string, range: { startLine: number; endLine: number; context?: number }): string {
  const lines = splitLines(text);
  if (lines.length === 0) return '(the file is now empty)';
  const context = range.context ?? 4;
  const first = Math.max(1, range.startLine - context);
  const last = Math.min(lines.length, Math.max(range.endLine, range.startLine) + context);
  return numberLines(lines.slice(first - 1, last), first);
}

/** A block of whole lines that matches a needle once indentation and runs of whitespace are ignored. */
export interface LooseMatch {
  /** Character span of the lines (without the last line's line break). */
  start: number;
  end: number;
  /** The first line's number (1-based). */
  line: number;
}

/**
 * Where `needle` matches whole lines of `text` when each line's indentation and runs of
 * whitespace are ignored (blank lines at the needle's ends do not count).
 */
export function findLooseLineMatches(text: string, needle: string): LooseMatch[] {
  const normalize = (line: string) => line.trim().replace(/\s+/g, ' ');
  const wanted = splitLines(needle.replace(/\r\n/g, '\n')).map(normalize);
  while (wanted.length > 0 && wanted[0] === '') wanted.shift();
  while (wanted.length > 0 && wanted[wanted.length - 1] === '') wanted.pop();
  if (wanted.length === 0) return [];
  const lines = text.split('\n');
  const starts: number[] = [];
  for (let i = 0, offset = 0; i < lines.length; offset += lines[i]!.length + 1, i += 1) starts.push(offset);
  const normalized = lines.map(normalize);
  const found: LooseMatch[] = [];
  for (let i = 0; i + wanted.length <= lines.length; i += 1) {
    if (!wanted.every((line, k) => normalized[i + k] === line)) continue;
    const last = i + wanted.length - 1;
    const lastLine = lines[last]!;
    found.push({ start: starts[i]!, end: starts[last]! + lastLine.length - (lastLine.endsWith('\r') ? 1 : 0), line: i + 1 });
  }
  return found;
}

/**
 * `replacement` moved from the needle's indentation to the file's: each indentation the needle's
 * lines had becomes the one the matched lines of the file have (four spaces → a tab, eight → two),
 * and a line indented otherwise keeps the first line's shift.
 */
export function reindent(replacement: string, options: { needle: string; matched: string; newline: string }): string {
  const indentOf = (line: string) => /^[ \t]*/.exec(line)![0];
  const needleLines = splitLines(options.needle.replace(/\r\n/g, '\n')).filter((line) => line.trim() !== '');
  const fileLines = options.matched.replace(/\r\n/g, '\n').split('\n').filter((line) => line.trim() !== '');
  const map = new Map<string, string>();
  needleLines.forEach((line, index) => {
    if (fileLines[index] !== undefined && !map.has(indentOf(line))) map.set(indentOf(line), indentOf(fileLines[index]!));
  });
  const from = indentOf(needleLines[0] ?? '');
  const to = indentOf(fileLines[0] ?? '');
  const lines = replacement.replace(/\r\n/g, '\n').replace(/\n$/, '').split('\n');
  return lines
    .map((line) => {
      if (line.trim() === '') return line;
      const indent = indentOf(line);
      const mapped = map.get(indent);
      if (mapped !== undefined) return mapped + line.slice(indent.length);
      return line.startsWith(from) ? to + line.slice(from.length) : line;
    })
    .join(options.newline);
}
