/**
 * Glob matching in plain TypeScript (Node 20 has no stable fs.glob), for the `glob` and `grep`
 * tools and the HTTP files-search route. Paths are '/'-separated and relative.
 *
 * Supported: `*` (within a segment), `?`, `**` (any number of segments, as a whole segment),
 * `{a,b}` (nested, expanded up to MAX_BRACE_EXPANSIONS), `[abc]`, `[a-z]`, `[!abc]` / `[^abc]`,
 * and `\` to escape the next character. Like shells, wildcards do not match a leading '.' of a
 * segment unless `dot` is set; a literal leading '.' in the pattern does (`.github/**`).
 */
import { GlobPatternError } from './glob-pattern-error.js';

export interface GlobOptions {
  /** Let wildcards match names that start with '.'. Default false. */
  dot?: boolean;
  /** A pattern without '/' is matched against the base name only (like grep --include). */
  matchBase?: boolean;
  /** Case-insensitive matching. Default false. */
  nocase?: boolean;
}

export type GlobMatcher = (relativePath: string) => boolean;

const MAX_BRACE_EXPANSIONS = 1000;
const MAX_PATTERN_LENGTH = 4096;

/** Compiles `pattern` once; the returned function tests relative paths. */
export function compileGlob(pattern: string, options: GlobOptions = {}): GlobMatcher {
  if (pattern.length > MAX_PATTERN_LENGTH) throw new GlobPatternError(`Glob pattern is longer than ${MAX_PATTERN_LENGTH} characters`);
  const expanded = expandBraces(normalizePattern(pattern));
  const anchored = expanded.map((item) => globToRegExp(item, options));
  const baseOnly = options.matchBase ? expanded.map((item) => !item.includes('/')) : expanded.map(() => false);
  return (relativePath: string) => {
    const normalized = relativePath.replace(/^\.\//, '');
    const baseName = normalized.slice(normalized.lastIndexOf('/') + 1);
    return anchored.some((regExp, index) => regExp.test(baseOnly[index] ? baseName : normalized));
  };
}

export function globMatch(pattern: string, relativePath: string, options: GlobOptions = {}): boolean {
  return compileGlob(pattern, options)(relativePath);
}

/** True when the pattern has any wildcard, class or brace. */
export function hasGlobMagic(pattern: string): boolean {
  return /[*?[{]/.test(pattern);
}

/**
 * Splits a pattern into its literal leading directories and the rest, so a walk can start
 * deep instead of at the root: `src/core/**\/*.ts` → { base: 'src/core', rest: '**\/*.ts' }.
 */
export function splitGlobBase(pattern: string): { base: string; rest: string } {
  const segments = normalizePattern(pattern).split('/');
  const baseSegments: string[] = [];
  while (segments.length > 1 && !hasGlobMagic(segments[0] as string) && !(segments[0] as string).includes('\\')) {
    baseSegments.push(segments.shift() as string);
  }
  return { base: baseSegments.join('/'), rest: segments.join('/') };
}

/** `{a,b{c,d}}` → ['a', 'bc', 'bd']. Braces without a top-level comma stay literal. */
export function expandBraces(pattern: string): string[] {
  const results: string[] = [];
  const pending = [pattern];
  while (pending.length > 0) {
    const current = pending.pop() as string;
    const group = findBraceGroup(current);
    if (!group) {
      results.push(current);
    } else {
      const prefix = current.slice(0, group.start);
      const suffix = current.slice(group.end + 1);
      for (const alternative of group.alternatives.reverse()) pending.push(prefix + alternative + suffix);
    }
    if (results.length + pending.length > MAX_BRACE_EXPANSIONS) {
      throw new GlobPatternError(`Glob pattern expands to more than ${MAX_BRACE_EXPANSIONS} alternatives`);
    }
  }
  return results;
}

function findBraceGroup(pattern: string): { start: number; end: number; alternatives: string[] } | undefined {
  for (let start = 0; start < pattern.length; start++) {
    const char = pattern[start];
    if (char === '\\') {
      start++;
      continue;
    }
    if (char !== '{') continue;
    let depth = 0;
    const commas: number[] = [];
    for (let index = start; index < pattern.length; index++) {
      const inner = pattern[index];
      if (inner === '\\') {
        index++;
      } else if (inner === '{') {
        depth++;
      } else if (inner === '}') {
        depth--;
        if (depth === 0) {
          if (commas.length === 0) break; // `{abc}`: literal, look for a later group
          const bounds = [start, ...commas, index];
          const alternatives = bounds.slice(1).map((end, i) => pattern.slice((bounds[i] as number) + 1, end));
          return { start, end: index, alternatives };
        }
      } else if (inner === ',' && depth === 1) {
        commas.push(index);
      }
    }
  }
  return undefined;
}

function normalizePattern(pattern: string): string {
  let result = pattern.replace(/\/{2,}/g, '/');
  while (result.startsWith('./')) result = result.slice(2);
  if (result.length > 1 && result.endsWith('/')) result = result.slice(0, -1);
  return result;
}

/** One brace-free pattern → an anchored RegExp over '/'-separated paths. */
export function globToRegExp(pattern: string, options: GlobOptions = {}): RegExp {
  const segments = pattern.split('/').filter((segment, index, all) => !(segment === '**' && all[index - 1] === '**'));
  const anySegment = options.dot ? '[^/]+' : '(?!\\.)[^/]+';
  let source = '';
  let needSeparator = false;
  segments.forEach((segment, index) => {
    const isLast = index === segments.length - 1;
    if (segment === '**') {
      if (isLast) {
        source += needSeparator ? `(?:/${anySegment})+` : `${anySegment}(?:/${anySegment})*`;
      } else {
        source += `${needSeparator ? '/' : ''}(?:${anySegment}/)*`;
        needSeparator = false;
      }
      return;
    }
    source += (needSeparator ? '/' : '') + segmentToRegExp(segment, options);
    needSeparator = true;
  });
  try {
    return new RegExp(`^${source}$`, options.nocase ? 'i' : '');
  } catch {
    throw new GlobPatternError(`Invalid glob pattern ${JSON.stringify(pattern)} (check its [...] classes)`);
  }
}

function segmentToRegExp(segment: string, options: GlobOptions): string {
  let source = '';
  const startsWithWildcard = /^[*?[]/.test(segment);
  if (!options.dot && startsWithWildcard) source += '(?!\\.)';
  for (let index = 0; index < segment.length; index++) {
    const char = segment[index] as string;
    if (char === '\\' && index + 1 < segment.length) {
      source += escapeRegExp(segment[++index] as string);
    } else if (char === '*') {
      while (segment[index + 1] === '*') index++;
      source += '[^/]*';
    } else if (char === '?') {
      source += '[^/]';
    } else if (char === '[') {
      const parsed = parseClass(segment, index);
      if (parsed) {
        source += parsed.source;
        index = parsed.end;
      } else {
        source += '\\[';
      }
    } else {
      source += escapeRegExp(char);
    }
  }
  return source;
}

/** `[...]` starting at `start`; undefined when unterminated (then '[' is literal). */
function parseClass(segment: string, start: number): { source: string; end: number } | undefined {
  let index = start + 1;
  let negated = false;
  if (segment[index] === '!' || segment[index] === '^') {
    negated = true;
    index++;
  }
  let body = '';
  let first = true;
  for (; index < segment.length; index++) {
    const char = segment[index] as string;
    if (char === ']' && !first) {
      return { source: negated ? `[^/${body}]` : `[${body}]`, end: index };
    }
    first = false;
    if (char === '\\' && index + 1 < segment.length) {
      body += escapeClassChar(segment[++index] as string, true);
    } else {
      body += escapeClassChar(char, false);
    }
  }
  return undefined;
}

function escapeClassChar(char: string, escapeHyphen: boolean): string {
  if (char === '-') return escapeHyphen ? '\\-' : '-';
  return /[\]\\^[]/.test(char) ? `\\${char}` : char;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}
