/**
 * The `file_editor` tool: view / create / str_replace / insert / undo_edit on text files inside
 * the workdir. Every path goes through the workspace resolver; failures come back as results.
 * `create` overwrites an existing file and records it in the undo history like every edit.
 */
import { z } from 'zod';
import { EditHistory } from './file-editor-history.js';
import { formatBytes, MAX_EDITABLE_BYTES, readTextFile } from './file-editor-io.js';
import { similarNames } from './file-editor-similar-names.js';
import { viewDirectory, viewText } from './file-editor-view.js';
import { loadDescription } from './load-description.js';
import {
  findLooseLineMatches,
  findOccurrences,
  findWhitespaceInsensitiveMatches,
  insertAfterLine,
  lineNumberAt,
  reindent,
  snippetAround,
  splitLines,
} from './text-edits.js';
import type { SyntaxChecker } from './syntax-check.js';
import { defineTool, type ToolContext, type ToolResult } from './tool.js';
import { PinScope, pinnedOf, resolveToolPath, toolFailure, type ToolPath } from './tool-paths.js';
import { PathNotFoundError } from '../workspace/path-not-found-error.js';
import { fileVersion, ViewedFiles } from './file-editor-viewed.js';

export const FILE_EDITOR_TOOL_NAME = 'file_editor';

export const fileEditorParameters = z.object({
  command: z.enum(['view', 'create', 'str_replace', 'insert', 'undo_edit']).describe('The operation to run.'),
  path: z.string().min(1).describe('File or directory path, relative to the workdir (or absolute inside it).'),
  file_text: z.string().optional().describe('For `create`: the full content of the file.'),
  old_str: z.string().optional().describe('For `str_replace`: the exact text to replace; must occur exactly once (unless `replace_all`).'),
  new_str: z
    .string()
    .optional()
    .describe('For `str_replace`: the replacement (omit to delete old_str). For `insert`: the lines to insert.'),
  replace_all: z.boolean().optional().describe('For `str_replace`: replace every occurrence of old_str (default false: it must occur exactly once).'),
  insert_line: z.number().int().min(0).optional().describe('For `insert`: insert after this line number (0 = top of the file).'),
  view_range: z
    .array(z.number().int())
    .min(2)
    .max(2)
    .optional()
    .describe('For `view` on a file: [start, end] line numbers, 1-based and inclusive; end -1 means to the end.'),
});

type FileEditorInput = z.infer<typeof fileEditorParameters>;

/** An edit of a file someone else wrote since the agent last saw it would be made blind: refused. */
function changedOnDisk(path: string): string {
  return `${path} has changed on disk since you last viewed or edited it (another command or process wrote it), so it was not changed. View it again, then make the edit on what it holds now.`;
}

const EDIT_FOOTER = 'Review the changes and make sure they are as expected. Edit the file again if necessary.';

/**
 * file_editor; `checker`: checks a file's syntax after each write (syntax-check.ts), its
 * diagnostics appended to the result. Without one, writes are not checked.
 */
export function createFileEditorTool(options: { checker?: SyntaxChecker } = {}) {
  const checker = options.checker ?? null;
  return defineTool({
    name: FILE_EDITOR_TOOL_NAME,
    description: loadDescription(import.meta.url, 'file-editor.md'),
    parameters: fileEditorParameters,
    argumentHints: {
      start_line: 'for `view`, use `view_range: [start, end]`',
      end_line: 'for `view`, use `view_range: [start, end]`',
      line: 'for `insert`, use `insert_line`',
    },
    async execute(input, context): Promise<ToolResult> {
      if (context.signal.aborted) return { isError: true, content: 'Aborted before file_editor ran.' };
      const scope = new PinScope();
      let result: ToolResult;
      try {
        switch (input.command) {
          case 'view':
            return await view(input, context, scope);
          case 'create':
            result = await create(input, context, scope);
            break;
          case 'str_replace':
            result = await replace(input, context, scope);
            break;
          case 'insert':
            result = await insert(input, context, scope);
            break;
          case 'undo_edit':
            result = await undo(input, context, scope);
            break;
        }
      } catch (error) {
        const failure = toolFailure(error, input.path);
        if (error instanceof PathNotFoundError) failure.content += await similarNames(context, input.path);
        return failure;
      } finally {
        await scope.release();
      }
      return checker && !result.isError && typeof result.data?.path === 'string' && !result.data.removed ? withSyntaxCheck(result, checker, context) : result;
    },
  });
}

export const fileEditorTool = createFileEditorTool();

/** The result with the check's verdict: errors say so in its first line, and their diagnostics follow. */
async function withSyntaxCheck(result: ToolResult, checker: SyntaxChecker, context: ToolContext): Promise<ToolResult> {
  const path = result.data!.path as string;
  const report = await checker.check({ workdir: context.workdir, path: `./${path}`, signal: context.signal }).catch(() => null);
  if (!report) return result;
  if (report.timedOut) return { ...result, content: `${result.content}\n[Syntax check (${report.checker}) did not finish in time: not checked.]` };
  if (report.ok) return { ...result, content: `${result.content}\n[Syntax check (${report.checker}): no errors.]`, data: { ...result.data, syntax_check: { checker: report.checker, ok: true } } };
  return {
    ...result,
    content: `Warning: ${path} was written but now has syntax errors (${report.checker}): fix them before you go on.\n${result.content}\n\n[${report.checker}]\n${report.output}`,
    data: { ...result.data, syntax_check: { checker: report.checker, ok: false } },
  };
}

async function view(input: FileEditorInput, context: ToolContext, scope: PinScope): Promise<ToolResult> {
  const target = await resolveToolPath(context, input.path, { mustExist: true, scope });
  const stats = await pinnedOf(target).stat();
  if (stats.type === 'directory') {
    if (input.view_range) return fail(`${target.relative} is a directory; view_range only applies to files.`);
    return viewDirectory({ workdirFs: context.workdirFs, root: target.root, absolutePath: target.absolute, displayPath: target.relative, signal: context.signal });
  }
  const read = await readTextFile(pinnedOf(target), target.relative);
  if (!read.ok) return read.result;
  ViewedFiles.from(context.state).remember(target.absolute, fileVersion(stats));
  return viewText(read.text, { displayPath: target.relative, viewRange: input.view_range });
}

async function create(input: FileEditorInput, context: ToolContext, scope: PinScope): Promise<ToolResult> {
  if (input.file_text === undefined) return fail('`create` needs `file_text` (the full content of the file).');
  if (Buffer.byteLength(input.file_text) > MAX_EDITABLE_BYTES) {
    return fail(`file_text is over the ${formatBytes(MAX_EDITABLE_BYTES)} limit; write large files with bash.`);
  }
  const checked = await resolveToolPath(context, input.path, { scope });
  const pinned = pinnedOf(checked);
  const existing = pinned.exists ? await pinned.stat().catch(() => undefined) : undefined;
  if (existing?.type === 'directory') return fail(`${checked.relative} is a directory; give a file path.`);
  let previous: Buffer | null = null;
  const viewed = ViewedFiles.from(context.state);
  if (existing && !viewed.has(checked.absolute)) {
    return fail(
      `${checked.relative} already exists and you have not viewed it in this conversation, so it was not overwritten. ` +
        'View it first (then `create` may replace it), or change part of it with `str_replace`.',
    );
  }
  if (existing && viewed.changedSince(checked.absolute, fileVersion(existing))) return fail(changedOnDisk(checked.relative));
  if (existing) {
    const read = await pinned.readFile(MAX_EDITABLE_BYTES);
    if (!read.bytes) return fail(`${checked.relative} exists and is ${formatBytes(read.size)}; file_editor will not overwrite a file over ${formatBytes(MAX_EDITABLE_BYTES)}.`);
    previous = read.bytes;
  }
  // Missing parents are made one at a time, each held open: a symlink planted meanwhile is not followed.
  await pinned.ensureParent();
  await pinned.writeFile(input.file_text);
  EditHistory.from(context.state).record(checked.absolute, previous);
  viewed.remember(checked.absolute, fileVersion(await pinned.stat()));
  const lineCount = splitLines(input.file_text).length;
  const verb = previous ? `overwritten, replacing ${splitLines(previous.toString('utf8')).length} lines (the previous version can be restored with undo_edit)` : 'created';
  return ok(`File ${checked.relative} ${verb}: ${lineCount} line${lineCount === 1 ? '' : 's'}.`, checked, { created: !previous, lines: lineCount });
}

async function replace(input: FileEditorInput, context: ToolContext, scope: PinScope): Promise<ToolResult> {
  if (input.old_str === undefined || input.old_str === '') return fail('`str_replace` needs a non-empty `old_str`.');
  const newStr = input.new_str ?? '';
  if (input.old_str === newStr) return fail('old_str and new_str are identical: nothing to change.');
  const target = await resolveEditable(input.path, context, scope);
  if ('result' in target) return target.result;
  const { file, text } = target;

  let oldStr = input.old_str;
  let replacement = newStr;
  let positions = findOccurrences(text, oldStr);
  if (positions.length === 0 && text.includes('\r\n') && !oldStr.includes('\r')) {
    oldStr = oldStr.replace(/\n/g, '\r\n'); // the model writes \n, the file uses CRLF
    replacement = replacement.replace(/\r?\n/g, '\r\n');
    positions = findOccurrences(text, oldStr);
  }
  if (positions.length === 0) return input.replace_all ? fail(noMatchMessage(text, input.old_str, file.relative)) : replaceLoosely({ input, context, target });
  if (input.replace_all) {
    let updated = '';
    let from = 0;
    for (const position of positions) {
      updated += text.slice(from, position) + replacement;
      from = position + oldStr.length;
    }
    updated += text.slice(from);
    await commitEdit({ context, file, previous: target.bytes, updated });
    const lines = positions.map((position, index) => lineNumberAt(updated, position + index * (replacement.length - oldStr.length)));
    const shown = lines.slice(0, 20).join(', ') + (lines.length > 20 ? ', …' : '');
    const first = lines[0]!;
    return ok(
      `The file ${file.relative} has been edited: ${positions.length} occurrence${positions.length === 1 ? '' : 's'} of old_str replaced (now at lines ${shown}). The first one in context:\n` +
        `${snippetAround(updated, { startLine: first, endLine: first + Math.max(splitLines(replacement).length - 1, 0) })}\n${EDIT_FOOTER}`,
      file,
      { replaced: positions.length, lines },
    );
  }
  if (positions.length > 1) {
    const lines = positions.map((position) => lineNumberAt(text, position));
    const shown = lines.slice(0, 20).join(', ') + (lines.length > 20 ? ', …' : '');
    return fail(
      `No replacement was performed: old_str occurs ${positions.length} times in ${file.relative}, at lines ${shown}. ` +
        'Include more surrounding lines in old_str so that it matches exactly one place, or set `replace_all: true` to replace every one.',
    );
  }
  const start = positions[0] as number;
  const updated = text.slice(0, start) + replacement + text.slice(start + oldStr.length);
  await commitEdit({ context, file, previous: target.bytes, updated });
  const startLine = lineNumberAt(updated, start);
  const endLine = startLine + Math.max(splitLines(replacement).length - 1, 0);
  return ok(
    `The file ${file.relative} has been edited. Here's the result of running \`cat -n\` on a snippet of ${file.relative}:\n` +
      `${snippetAround(updated, { startLine, endLine })}\n${EDIT_FOOTER}`,
    file,
    { start_line: startLine, end_line: endLine },
  );
}

/**
 * old_str did not appear verbatim: when it matches exactly one block of whole lines with
 * indentation and runs of whitespace ignored, that block is replaced (new_str moved to the file's
 * indentation), and the result says it was matched loosely. Else the usual refusal.
 */
async function replaceLoosely(options: { input: FileEditorInput; context: ToolContext; target: { file: ToolPath; text: string; bytes: Buffer } }): Promise<ToolResult> {
  const { input, context, target } = options;
  const { file, text } = target;
  const matches = findLooseLineMatches(text, input.old_str!);
  if (matches.length !== 1) return fail(noMatchMessage(text, input.old_str!, file.relative));
  const match = matches[0]!;
  const replacement = reindent(input.new_str ?? '', { needle: input.old_str!, matched: text.slice(match.start, match.end), newline: text.includes('\r\n') ? '\r\n' : '\n' });
  const updated = text.slice(0, match.start) + replacement + text.slice(match.end);
  await commitEdit({ context, file, previous: target.bytes, updated });
  const endLine = match.line + Math.max(splitLines(replacement).length - 1, 0);
  return ok(
    `The file ${file.relative} has been edited, matched loosely: old_str did not appear verbatim, but exactly one place (line ${match.line}) matches it when indentation and whitespace are ignored; ` +
      `it was replaced, new_str indented like the file. Check the result:\n${snippetAround(updated, { startLine: match.line, endLine })}\n${EDIT_FOOTER}`,
    file,
    { start_line: match.line, end_line: endLine, matched: 'loose' },
  );
}

async function insert(input: FileEditorInput, context: ToolContext, scope: PinScope): Promise<ToolResult> {
  if (input.insert_line === undefined) return fail('`insert` needs `insert_line` (0 inserts at the top of the file).');
  if (input.new_str === undefined) return fail('`insert` needs `new_str` (the lines to insert).');
  const target = await resolveEditable(input.path, context, scope);
  if ('result' in target) return target.result;
  const { file, text } = target;
  const lineCount = splitLines(text).length;
  if (input.insert_line > lineCount) {
    return fail(`Invalid insert_line ${input.insert_line}: ${file.relative} has ${lineCount} lines, so it must be between 0 and ${lineCount}.`);
  }
  const result = insertAfterLine(text, input.insert_line, input.new_str);
  await commitEdit({ context, file, previous: target.bytes, updated: result.text });
  return ok(
    `The file ${file.relative} has been edited. Here's the result of running \`cat -n\` on a snippet of ${file.relative}:\n` +
      `${snippetAround(result.text, { startLine: result.firstLine, endLine: result.lastLine })}\n${EDIT_FOOTER}`,
    file,
    { start_line: result.firstLine, end_line: result.lastLine },
  );
}

async function undo(input: FileEditorInput, context: ToolContext, scope: PinScope): Promise<ToolResult> {
  const file = await resolveToolPath(context, input.path, { scope });
  const pinned = pinnedOf(file);
  const history = EditHistory.from(context.state);
  const entry = history.pop(file.absolute);
  if (!entry) {
    return fail(`No edit history for ${file.relative}: only edits made with file_editor in this conversation can be undone.`);
  }
  const left = history.depth(file.absolute);
  const remaining = left > 0 ? `${left} earlier edit${left === 1 ? '' : 's'} of this file can still be undone.` : '';
  if (entry.previous === null) {
    if (pinned.exists) await pinned.unlink().catch(() => undefined);
    return ok(`Undid the creation of ${file.relative}: the file was removed. ${remaining}`.trim(), file, { removed: true });
  }
  await pinned.ensureParent();
  await pinned.writeFile(entry.previous);
  ViewedFiles.from(context.state).remember(file.absolute, fileVersion(await pinned.stat()));
  const lines = splitLines(entry.previous.toString('utf8')).length;
  return ok(`Last edit to ${file.relative} undone: restored the previous version (${lines} lines). ${remaining}`.trim(), file, { lines });
}

async function resolveEditable(
  userPath: string,
  context: ToolContext,
  scope: PinScope,
): Promise<{ file: ToolPath; text: string; bytes: Buffer } | { result: ToolResult }> {
  const file = await resolveToolPath(context, userPath, { mustExist: true, scope });
  const stats = await pinnedOf(file).stat();
  if (stats.type === 'directory') return { result: fail(`${file.relative} is a directory, not a file.`) };
  const read = await readTextFile(pinnedOf(file), file.relative);
  if (!read.ok) return { result: read.result };
  if (ViewedFiles.from(context.state).changedSince(file.absolute, fileVersion(stats))) return { result: fail(changedOnDisk(file.relative)) };
  return { file, text: read.text, bytes: read.bytes };
}

async function commitEdit(edit: { context: ToolContext; file: ToolPath; previous: Buffer; updated: string }): Promise<void> {
  if (Buffer.byteLength(edit.updated) > MAX_EDITABLE_BYTES) {
    throw Object.assign(new Error('File too large'), { code: 'EFBIG' });
  }
  await pinnedOf(edit.file).writeFile(edit.updated);
  EditHistory.from(edit.context.state).record(edit.file.absolute, edit.previous);
  ViewedFiles.from(edit.context.state).remember(edit.file.absolute, fileVersion(await pinnedOf(edit.file).stat()));
}

function noMatchMessage(text: string, oldStr: string, displayPath: string): string {
  const near = findWhitespaceInsensitiveMatches(text, oldStr);
  const base = `No replacement was performed: old_str did not appear verbatim in ${displayPath}.`;
  if (near.length > 0) {
    return `${base} A match exists if whitespace is ignored, near line ${near.slice(0, 5).join(', ')}: check indentation (tabs vs spaces) and trailing spaces, and copy the exact text from a fresh \`view\`.`;
  }
  return `${base} View the file again and copy the exact text (without the line-number prefix), including indentation.`;
}

function ok(content: string, file: ToolPath, extra: Record<string, unknown> = {}): ToolResult {
  return { isError: false, content, data: { path: file.relative, ...extra } };
}

function fail(content: string): ToolResult {
  return { isError: true, content };
}
