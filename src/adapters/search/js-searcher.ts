/**
 * The pure-JS content search used when ripgrep is not on PATH. It walks the tree (skipping
 * hidden entries, .git and node_modules like rg does by default), orders candidate files newest
 * first, skips binary and very large files, and stops at the match cap or a scan budget.
 * Unlike rg it does not read .gitignore. A pathological regex can still be slow: each line is
 * only tested on its first MAX_TESTED_LINE_CHARS characters to bound that.
 */
import { constants } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { pinInWorkdir } from '../workspace/pin-path.js';
import { toWorkdirRelative } from '../../core/workspace/resolve-path.js';
import path from 'node:path';
import { compileGlob, type GlobMatcher } from '../../core/workspace/glob-match.js';
import { looksBinary } from '../../core/workspace/looks-binary.js';
import { SearchPatternError } from '../../core/workspace/search-pattern-error.js';
import { truncateLine, type TextMatch, type TextSearcher, type TextSearchOptions, type TextSearchResult } from '../../core/workspace/text-searcher.js';
import { walkDirectory } from '../workspace/walk.js';

const MAX_FILE_BYTES = 10 * 1024 * 1024;
const MAX_BYTES_SCANNED = 256 * 1024 * 1024;
const MAX_TESTED_LINE_CHARS = 20_000;

interface CandidateFile {
  path: string;
  mtimeMs: number;
  size: number;
}

/** Compiles a search pattern the way both engines understand it (`(?i)` prefix = ignore case). */
export function compileSearchPattern(pattern: string): RegExp {
  const ignoreCase = pattern.startsWith('(?i)');
  const source = ignoreCase ? pattern.slice(4) : pattern;
  try {
    return new RegExp(source, ignoreCase ? 'i' : '');
  } catch (error) {
    const reason = (error as Error).message.replace(/^Invalid regular expression: \/.*\/[a-z]*: /s, '');
    throw new SearchPatternError(`Invalid regular expression ${JSON.stringify(pattern)}: ${reason}`);
  }
}

export const jsTextSearcher: TextSearcher = {
  name: 'javascript',
  async search(options: TextSearchOptions): Promise<TextSearchResult> {
    const regExp = compileSearchPattern(options.pattern);
    const include = options.include ? compileGlob(options.include, { matchBase: true, dot: true }) : undefined;
    const { files, incomplete: walkIncomplete } = await collectFiles(options, include);
    files.sort((a, b) => b.mtimeMs - a.mtimeMs || (a.path < b.path ? -1 : 1));

    const matches: TextMatch[] = [];
    let scanned = 0;
    for (const file of files) {
      if (options.signal?.aborted) return { matches, truncated: false, incomplete: 'aborted' };
      if (scanned > MAX_BYTES_SCANNED) {
        return { matches, truncated: false, incomplete: `stopped after scanning ${MAX_BYTES_SCANNED / 1024 / 1024} MB` };
      }
      if (file.size > MAX_FILE_BYTES) continue;
      const bytes = await readPinned(options.root, file.path).catch(() => undefined);
      if (!bytes || looksBinary(bytes)) continue;
      scanned += bytes.length;
      const lines = bytes.toString('utf8').split('\n');
      for (let index = 0; index < lines.length; index++) {
        const line = lines[index] as string;
        if (!regExp.test(line.length > MAX_TESTED_LINE_CHARS ? line.slice(0, MAX_TESTED_LINE_CHARS) : line)) continue;
        if (index === lines.length - 1 && line === '') continue;
        if (matches.length >= options.maxMatches) return { matches, truncated: true };
        matches.push({ path: file.path, line: index + 1, text: truncateLine(line, options.maxLineLength), mtimeMs: file.mtimeMs });
      }
    }
    return walkIncomplete ? { matches, truncated: false, incomplete: walkIncomplete } : { matches, truncated: false };
  },
};

async function collectFiles(
  options: TextSearchOptions,
  include: GlobMatcher | undefined,
): Promise<{ files: CandidateFile[]; incomplete?: string }> {
  const searchStats = await stat(options.searchPath);
  if (searchStats.isFile()) {
    return { files: [{ path: options.searchPath, mtimeMs: searchStats.mtimeMs, size: searchStats.size }] };
  }
  const files: CandidateFile[] = [];
  let incomplete: string | undefined;
  const walk = walkDirectory({
    root: options.root,
    start: options.searchPath,
    includeHidden: false,
    ...(options.signal ? { signal: options.signal } : {}),
    onLimit: (limit) => {
      if (limit === 'max_entries') incomplete = 'the directory tree is too large; only part of it was searched';
    },
  });
  for await (const entry of walk) {
    if (entry.type !== 'file') continue;
    if (include && !include(entry.relativePath)) continue;
    files.push({ path: path.resolve(entry.absolutePath), mtimeMs: entry.mtimeMs, size: entry.size });
  }
  return incomplete ? { files, incomplete } : { files };
}

/** A file's bytes, read through its pinned directory and never through a symlink swapped in since the walk. */
async function readPinned(root: string, filePath: string): Promise<Buffer> {
  const pinned = await pinInWorkdir(root, toWorkdirRelative(root, filePath), { mustExist: true });
  try {
    const handle = await open(pinned.at(), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      return await handle.readFile();
    } finally {
      await handle.close();
    }
  } finally {
    await pinned.release();
  }
}
