/**
 * A files-search pattern: a glob over paths relative to the workdir. It must pass the resolver's
 * syntax checks like any path (no absolute paths, encoded forms, NUL, backslashes — so no `\`
 * escapes — and no `..` segments at all); its literal leading directories become the walk's
 * start, resolved by the caller through the WorkdirFileSystem port.
 */
import { compileGlob, hasGlobMagic, splitGlobBase } from './glob-match.js';
import { GlobPatternError } from './glob-pattern-error.js';
import { parseUserPath } from './resolve-path.js';
import { DEFAULT_SKIPPED_DIRECTORIES } from './walk-entry.js';

export interface SearchGlob {
  /** Literal leading directories ('' for the workdir root). */
  base: string;
  /** True when the pattern has no wildcard: it names one path, which the caller resolves. */
  literal: boolean;
  /** Tests a path relative to `base`. */
  matches: (relativePath: string) => boolean;
  /** Deepest level worth walking below `base`. */
  maxDepth: number;
  /** .git and node_modules are not entered unless the pattern names them. */
  skipDirectory: (name: string) => boolean;
}

const MAX_DEPTH = 64;

export function compileSearchGlob(pattern: string): SearchGlob {
  parseUserPath(pattern); // throws InvalidPathError / PathOutsideWorkdirError
  const segments = pattern.split('/');
  if (segments.includes('..')) throw new GlobPatternError("'..' segments are not allowed in a search pattern");
  const { base, rest } = splitGlobBase(pattern);
  const restSegments = rest.split('/').filter((segment) => segment !== '' && segment !== '.');
  return {
    base: base === '' ? '.' : base,
    literal: !hasGlobMagic(pattern),
    matches: compileGlob(restSegments.join('/') || '**'),
    maxDepth: restSegments.includes('**') ? MAX_DEPTH : Math.max(restSegments.length, 1),
    skipDirectory: (name) => DEFAULT_SKIPPED_DIRECTORIES.has(name) && !pattern.includes(name),
  };
}
