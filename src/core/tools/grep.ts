/**
 * The `grep` tool: lines matching a regex, `path:line: text`, files newest first, capped.
 * The search engine is injected: `createGrepTool(searcher)` with ripgrep from adapters/ when it
 * is on PATH, else the pure-JS searcher (adapters/workspace/js-searcher.ts).
 */
import { z } from 'zod';
import { toWorkdirRelative } from '../workspace/resolve-path.js';
import type { TextSearcher, TextSearchResult } from '../workspace/text-searcher.js';
import { loadDescription } from './load-description.js';
import { defineTool, type ToolDefinition, type ToolResult } from './tool.js';
import { resolveToolPath, toolFailure } from './tool-paths.js';

export const GREP_TOOL_NAME = 'grep';
export const MAX_GREP_MATCHES = 100;
export const MAX_GREP_LINE_LENGTH = 300;

export const grepParameters = z.object({
  pattern: z.string().min(1).describe('Regular expression to search for in file contents.'),
  path: z.string().optional().describe('Directory or file to search, relative to the workdir (default: the workdir).'),
  include: z.string().optional().describe('Glob of the files to search, e.g. "*.ts" or "src/**/*.{js,jsx}".'),
});

const description = loadDescription(import.meta.url, 'grep.md');

export function createGrepTool(searcher: TextSearcher): ToolDefinition<typeof grepParameters> {
  return defineTool({
    name: GREP_TOOL_NAME,
    description,
    parameters: grepParameters,
    argumentAliases: { glob: 'include', file_pattern: 'include', regex: 'pattern', query: 'pattern' },
    async execute(input, context): Promise<ToolResult> {
      try {
        const target = await resolveToolPath(context, input.path ?? '.', { mustExist: true });
        const result = await searcher.search({
          root: target.root,
          searchPath: target.absolute,
          pattern: input.pattern,
          ...(input.include ? { include: input.include } : {}),
          maxMatches: MAX_GREP_MATCHES,
          maxLineLength: MAX_GREP_LINE_LENGTH,
          signal: context.signal,
        });
        return formatResult({ result, root: target.root, input, where: target.relative, engine: searcher.name });
      } catch (error) {
        return toolFailure(error, input.path);
      }
    },
  });
}

function formatResult(options: {
  result: TextSearchResult;
  root: string;
  input: z.infer<typeof grepParameters>;
  where: string;
  engine: string;
}): ToolResult {
  const { result, root, input, where, engine } = options;
  const files = new Set(result.matches.map((match) => match.path));
  const data = { matches: result.matches.length, files: files.size, truncated: result.truncated, engine };
  const notes: string[] = [];
  if (result.truncated) {
    notes.push(`[Results capped at ${MAX_GREP_MATCHES} matching lines; narrow the pattern, path or include to see the rest.]`);
  }
  if (result.incomplete) notes.push(`[Search incomplete: ${result.incomplete}.]`);
  if (result.matches.length === 0) {
    const scope = `${where === '.' ? 'the workdir' : where}${input.include ? ` (files matching ${JSON.stringify(input.include)})` : ''}`;
    return { isError: false, content: [`No matches for /${input.pattern}/ in ${scope}.`, ...notes].join('\n'), data };
  }
  const lines = result.matches.map((match) => `${toWorkdirRelative(root, match.path)}:${match.line}: ${match.text}`);
  const header = `Found ${result.matches.length} matching line${result.matches.length === 1 ? '' : 's'} in ${files.size} file${files.size === 1 ? '' : 's'} (newest files first):`;
  return { isError: false, content: [header, ...lines, ...notes].join('\n'), data };
}
