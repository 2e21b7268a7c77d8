/** file_editor's `view`: numbered file content (with view_range) and two-level directory listings. */
import type { WorkdirFileSystem } from '../workspace/workdir-file-system.js';
import { formatNumberedLine, splitLines } from './text-edits.js';
import type { ToolResult } from './tool.js';
import { MAX_OBSERVATION_CHARS } from './tool-output.js';

/** A view pages itself below the executor's cap, so a long file is read on with view_range rather than cut in the middle. */
const MAX_VIEW_CHARS = MAX_OBSERVATION_CHARS - 2_000;
const MAX_LISTED_ENTRIES = 500;
/** Listed by `view` on a directory but not expanded (hidden names are skipped altogether). */
const NOISE_DIRECTORIES = new Set(['node_modules', '__pycache__', 'venv', 'site-packages', 'target', 'dist', 'build', 'coverage']);

export function viewText(text: string, options: { displayPath: string; viewRange?: number[] | undefined }): ToolResult {
  const { displayPath, viewRange } = options;
  const lines = splitLines(text);
  if (lines.length === 0) return { isError: false, content: `The file ${displayPath} is empty.`, data: { lines: 0 } };

  let start = 1;
  let end = lines.length;
  const notes: string[] = [];
  if (viewRange) {
    const [from, to] = viewRange as [number, number];
    if (from < 1 || from > lines.length) {
      return { isError: true, content: `Invalid view_range [${from}, ${to}]: the first line must be between 1 and ${lines.length} (${displayPath} has ${lines.length} lines).` };
    }
    if (to !== -1 && to < from) {
      return { isError: true, content: `Invalid view_range [${from}, ${to}]: the end must be -1 (to the end) or at least the start line.` };
    }
    start = from;
    end = to === -1 ? lines.length : Math.min(to, lines.length);
    if (to > lines.length) notes.push(`(The file has only ${lines.length} lines; showing up to the end.)`);
  }

  const shown: string[] = [];
  let characters = 0;
  let lastShown = start - 1;
  for (let lineNumber = start; lineNumber <= end; lineNumber++) {
    const formatted = formatNumberedLine(lines[lineNumber - 1] as string, lineNumber);
    if (characters + formatted.length > MAX_VIEW_CHARS && shown.length > 0) break;
    shown.push(formatted);
    characters += formatted.length + 1;
    lastShown = lineNumber;
  }
  if (lastShown < end) {
    notes.push(`[Output capped: showed lines ${start}-${lastShown} of ${lines.length}. Use view_range [${lastShown + 1}, ${Math.min(end, lastShown + 500)}] to see more.]`);
  }
  const header = `Here's the result of running \`cat -n\` on ${displayPath}${viewRange ? ` (lines ${start}-${end} of ${lines.length})` : ''}:`;
  return {
    isError: false,
    content: [header, shown.join('\n'), ...notes].join('\n'),
    data: { lines: lines.length, start_line: start, end_line: lastShown },
  };
}

export async function viewDirectory(options: { workdirFs: WorkdirFileSystem; root: string; absolutePath: string; displayPath: string; signal?: AbortSignal }): Promise<ToolResult> {
  const prefix = options.displayPath === '.' ? '' : `${options.displayPath}/`;
  const listed: string[] = [];
  let more = false;
  const walk = options.workdirFs.walk({
    root: options.root,
    start: options.absolutePath,
    maxDepth: 2,
    maxEntries: 20_000,
    includeHidden: false,
    skipDirectory: () => false,
    shouldDescend: (entry) => !NOISE_DIRECTORIES.has(entry.name),
    ...(options.signal ? { signal: options.signal } : {}),
    onLimit: (limit) => {
      if (limit === 'max_entries') more = true;
    },
  });
  for await (const entry of walk) {
    if (listed.length >= MAX_LISTED_ENTRIES) {
      more = true;
      break;
    }
    const suffix = entry.type !== 'directory' ? '' : NOISE_DIRECTORIES.has(entry.name) ? '/ (not expanded)' : '/';
    listed.push(`${prefix}${entry.relativePath}${suffix}`);
  }
  const header =
    `Here are the files and directories up to 2 levels deep in ${options.displayPath === '.' ? 'the workdir (.)' : options.displayPath}, ` +
    'excluding hidden items (dependency and build folders such as node_modules are not expanded):';
  const body = listed.length > 0 ? listed.join('\n') : '(empty directory)';
  const tail = more ? `\n[Listing capped at ${listed.length} entries; view a subdirectory or use glob to narrow it.]` : '';
  return { isError: false, content: `${header}\n${body}${tail}`, data: { entries: listed.length, capped: more } };
}
