/**
 * The `glob` tool: files whose path (relative to `path`) matches a glob, newest first, capped.
 * Walks from the pattern's literal prefix (`src/core/**` starts in src/core) with the bounded
 * workspace walker, so symlinks leaving the workdir are never followed.
 */
import path from 'node:path';
import { z } from 'zod';
import { compileGlob, splitGlobBase } from '../workspace/glob-match.js';
import { isInsideRoot, toWorkdirRelative } from '../workspace/resolve-path.js';
import type { PinnedEntry } from '../workspace/workdir-file-system.js';
import { loadDescription } from './load-description.js';
import { defineTool, type ToolResult } from './tool.js';
import { PinScope, pinnedOf, resolveToolPath, toolFailure } from './tool-paths.js';

export const GLOB_TOOL_NAME = 'glob';
export const MAX_GLOB_RESULTS = 100;

export const globParameters = z.object({
  pattern: z.string().min(1).describe('Glob pattern, e.g. "**/*.ts", "src/**/*.{js,jsx}", "*.md" (top level only).'),
  path: z.string().optional().describe('Directory to search in, relative to the workdir (default: the workdir).'),
});

export const globTool = defineTool({
  name: GLOB_TOOL_NAME,
  description: loadDescription(import.meta.url, 'glob.md'),
  parameters: globParameters,
  async execute(input, context): Promise<ToolResult> {
    const scope = new PinScope();
    try {
      const searchDir = await resolveToolPath(context, input.path ?? '.', { mustExist: true, scope });
      if ((await pinnedOf(searchDir).stat()).type !== 'directory') {
        return { isError: true, content: `${searchDir.relative} is not a directory; give a directory as path.` };
      }
      const pattern = relativePattern(input.pattern, searchDir.absolute, context.workdir);
      if (pattern === undefined) {
        return { isError: true, content: `The pattern ${JSON.stringify(input.pattern)} must stay inside the search directory (no '..', absolute patterns only inside it).` };
      }
      const { base, rest } = splitGlobBase(pattern);
      const matches = compileGlob(rest);
      const start = base ? await resolveToolPath(context, path.join(searchDir.absolute, base), { scope }).catch(() => undefined) : searchDir;
      const found: Array<{ relative: string; mtimeMs: number }> = [];
      let incomplete = false;
      if (start && (await isDirectory(pinnedOf(start)))) {
        const walk = context.workdirFs.walk({ root: searchDir.root, start: start.absolute, signal: context.signal, onLimit: () => (incomplete = true) });
        for await (const entry of walk) {
          if (entry.type !== 'file' || !matches(entry.relativePath)) continue;
          found.push({ relative: toWorkdirRelative(searchDir.root, entry.absolutePath), mtimeMs: entry.mtimeMs });
        }
      }
      return formatResult({ found, pattern: input.pattern, where: searchDir.relative, incomplete });
    } catch (error) {
      return toolFailure(error, input.path);
    } finally {
      await scope.release();
    }
  },
});

async function isDirectory(pinned: PinnedEntry): Promise<boolean> {
  if (!pinned.exists) return false;
  return (await pinned.stat().catch(() => undefined))?.type === 'directory';
}

/** The pattern relative to the search dir, or undefined when it would leave it. */
function relativePattern(pattern: string, searchDir: string, workdir: string): string | undefined {
  let relative = pattern;
  if (pattern.startsWith('/')) {
    const prefix = [searchDir, path.resolve(workdir)].find((dir) => isInsideRoot(dir, pattern) && pattern !== dir);
    if (!prefix) return undefined;
    relative = pattern.slice(prefix.length).replace(/^\/+/, '');
  }
  if (relative.split('/').some((segment) => segment === '..') || relative.includes('\0')) return undefined;
  return relative;
}

function formatResult(result: { found: Array<{ relative: string; mtimeMs: number }>; pattern: string; where: string; incomplete: boolean }): ToolResult {
  const { found, pattern, where, incomplete } = result;
  const location = where === '.' ? 'the workdir' : where;
  if (found.length === 0) {
    const note = incomplete
      ? ' (the tree is very large and only part of it was searched)'
      : pattern.includes('/') || pattern.includes('**') ? '' : ` (the pattern only matches at that level; use "**/${pattern}" to search subdirectories too)`;
    return { isError: false, content: `No files found matching ${JSON.stringify(pattern)} in ${location}${note}.`, data: { count: 0, truncated: false } };
  }
  found.sort((a, b) => b.mtimeMs - a.mtimeMs || (a.relative < b.relative ? -1 : 1));
  const shown = found.slice(0, MAX_GLOB_RESULTS).map((item) => item.relative);
  const notes: string[] = [];
  if (found.length > MAX_GLOB_RESULTS) {
    notes.push(`[Showing the ${MAX_GLOB_RESULTS} most recently modified of ${found.length} matches; use a more specific pattern or path.]`);
  }
  if (incomplete) notes.push('[The tree is very large: only part of it was searched.]');
  return {
    isError: false,
    content: [shown.join('\n'), ...notes].join('\n'),
    data: { count: found.length, shown: shown.length, truncated: found.length > MAX_GLOB_RESULTS || incomplete },
  };
}
