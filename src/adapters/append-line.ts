import fs from 'node:fs';
import path from 'node:path';

/**
 * Append one line to a line-per-record file, all or nothing: a write cut short (the disk is full)
 * is truncated away, so that no partial line is left for the next append to continue. The file's
 * directory is made when it is missing (found by the open failing, not by a mkdir before every
 * append: run records and checkpoints append a line at every step).
 */
export function appendLine(file: string, line: string, options: { mode?: number; fsync?: boolean } = {}): void {
  const bytes = Buffer.from(`${line}\n`, 'utf8');
  const fd = openToAppend(file, options.mode ?? 0o600);
  let written = 0;
  try {
    while (written < bytes.length) written += fs.writeSync(fd, bytes, written);
    if (options.fsync) fs.fsyncSync(fd);
  } catch (error) {
    // Only this process appends to the file: what this call wrote is the file's last `written` bytes.
    if (written > 0) fs.ftruncateSync(fd, fs.fstatSync(fd).size - written);
    throw error;
  } finally {
    fs.closeSync(fd);
  }
}

function openToAppend(file: string, mode: number): number {
  try {
    return fs.openSync(file, 'a', mode);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    fs.mkdirSync(path.dirname(file), { recursive: true });
    return fs.openSync(file, 'a', mode);
  }
}
