/**
 * file_editor's reading of text: size-limited and binary-refusing, through the pinned entry
 * (which never follows a symlink in the final component).
 */
import { looksBinary } from '../workspace/looks-binary.js';
import type { PinnedEntry } from '../workspace/workdir-file-system.js';
import type { ToolResult } from './tool.js';

/** Files larger than this are neither shown nor edited by file_editor. */
export const MAX_EDITABLE_BYTES = 5 * 1024 * 1024;

export type TextFileRead = { ok: true; text: string; bytes: Buffer } | { ok: false; result: ToolResult };

/** Reads a file as UTF-8 text, or explains to the model why it cannot be shown or edited. */
export async function readTextFile(file: PinnedEntry, displayPath: string): Promise<TextFileRead> {
  const { bytes, size } = await file.readFile(MAX_EDITABLE_BYTES);
  if (!bytes) {
    return failure(
      `${displayPath} is ${formatBytes(size)}, over file_editor's ${formatBytes(MAX_EDITABLE_BYTES)} limit. ` +
        'Inspect it with bash (head, tail, sed -n, grep) instead.',
    );
  }
  if (looksBinary(bytes)) {
    return failure(
      `${displayPath} looks like a binary file (it contains NUL bytes); file_editor only handles text. ` +
        'Use bash (e.g. `file`, `xxd | head`) to inspect it.',
    );
  }
  const text = bytes.toString('utf8');
  if (!Buffer.from(text, 'utf8').equals(bytes)) {
    return failure(`${displayPath} is not valid UTF-8 text; file_editor could corrupt it. Use bash (iconv, sed) instead.`);
  }
  return { ok: true, text, bytes };
}

export function formatBytes(size: number): string {
  if (size < 1024) return `${size} B`;
  if (size < 1024 * 1024) return `${(size / 1024).toFixed(1)} KB`;
  return `${(size / 1024 / 1024).toFixed(1)} MB`;
}

function failure(content: string): TextFileRead {
  return { ok: false, result: { isError: true, content } };
}
