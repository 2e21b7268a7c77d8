/**
 * Content search as core sees it. adapters/ provides a pure-JS implementation
 * (workspace/js-searcher.ts) and a ripgrep one. Both follow the same contract so the grep tool
 * can use either.
 */
export interface TextSearchOptions {
  /** The real workdir: nothing outside it is read. */
  root: string;
  /** Real absolute file or directory inside `root` to search. */
  searchPath: string;
  /** Regular expression (the common subset of JS and Rust regex syntax; `(?i)` prefix = ignore case). */
  pattern: string;
  /** Glob on file paths relative to `searchPath`; without '/', on base names (`*.ts`). */
  include?: string;
  /** Stop after this many matching lines (then `truncated`). */
  maxMatches: number;
  /** Longer matching lines are cut with a marker. */
  maxLineLength: number;
  signal?: AbortSignal;
}

export interface TextMatch {
  /** Absolute path of the file. */
  path: string;
  /** 1-based line number. */
  line: number;
  /** The matching line, without its line ending, possibly truncated. */
  text: string;
  mtimeMs: number;
}

export interface TextSearchResult {
  /** Files newest first (mtime), lines in order within a file. */
  matches: TextMatch[];
  /** More matches existed than `maxMatches`. */
  truncated: boolean;
  /** Set when the search stopped early for another reason (timeout, aborted, scan budget). */
  incomplete?: string;
}

export interface TextSearcher {
  /** 'ripgrep' or 'javascript': shown in the tool's data for diagnosis (one chosen at its first search names none before). */
  readonly name: string;
  /** Throws SearchPatternError for a pattern that does not compile. */
  search(options: TextSearchOptions): Promise<TextSearchResult>;
}

/** Cuts a line to `maxLength` characters with a visible marker. */
export function truncateLine(text: string, maxLength: number): string {
  const withoutCr = text.endsWith('\r') ? text.slice(0, -1) : text;
  if (withoutCr.length <= maxLength) return withoutCr;
  return `${withoutCr.slice(0, maxLength)} …[line truncated, ${withoutCr.length} chars]`;
}
