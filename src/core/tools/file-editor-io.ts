/**
 * file_editor's file access: size-limited, binary-refusing, and never following a symlink in
 * the final component (O_NOFOLLOW), which closes the race between resolving a path and using it
 * for that component.
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { looksBinary } from '../workspace/looks-binary.js';
import type { ToolResult } from './tool.js';

/** Files larger than this are neither shown nor edited by file_editor. */
export const MAX_EDITABLE_BYTES = 5 * 1024 * 1024;

export type TextFileRead = { ok: true; text: string; bytes: Buffer } | { ok: false; result: ToolResult };

export async function readBytesNoFollow(filePath: string, maxBytes: number): Promise<{ bytes?: Buffer; size: number }> {
  const handle = await open(filePath, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const stats = await handle.stat();
    if (stats.isDirectory()) throw Object.assign(new Error('Is a directory'), { code: 'EISDIR' });
    if (stats.size > maxBytes) return { size: stats.size };
    const bytes = await handle.readFile();
    return bytes.length > maxBytes ? { size: bytes.length } : { bytes, size: bytes.length };
  } finally {
    await handle.close();
  }
}

/**
 * Writes a file the agent will own: given to `owner` (the workdir's, when the server runs as root)
 * and without set-id bits, which a write by root would otherwise leave in place.
 */
export async function writeBytesNoFollow(filePath: string, data: Buffer | string, owner?: { uid: number; gid: number }): Promise<void> {
  const flags = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;
  const handle = await open(filePath, flags, 0o666);
  try {
    await handle.writeFile(data);
    const stats = await handle.stat();
    if (owner && process.geteuid?.() === 0 && (stats.uid !== owner.uid || stats.gid !== owner.gid)) await handle.chown(owner.uid, owner.gid);
    if ((stats.mode & 0o6000) !== 0) await handle.chmod(stats.mode & 0o1777);
  } finally {
    await handle.close();
  }
}

/** Reads a file as UTF-8 text, or explains to the model why it cannot be shown or edited. */
export async function readTextFile(filePath: string, displayPath: string): Promise<TextFileRead> {
  const { bytes, size } = await readBytesNoFollow(filePath, MAX_EDITABLE_BYTES);
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
