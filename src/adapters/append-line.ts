import fs from 'node:fs';

/**
 * Append one line to a line-per-record file, all or nothing: a write cut short (the disk is full)
 * is truncated away, so that no partial line is left for the next append to continue.
 */
export function appendLine(file: string, line: string, options: { mode?: number; fsync?: boolean } = {}): void {
  const fd = fs.openSync(file, 'a', options.mode ?? 0o600);
  try {
    const size = fs.fstatSync(fd).size;
    const bytes = Buffer.from(`${line}\n`, 'utf8');
    try {
      let written = 0;
      while (written < bytes.length) written += fs.writeSync(fd, bytes, written);
      if (options.fsync) fs.fsyncSync(fd);
    } catch (error) {
      fs.ftruncateSync(fd, size);
      throw error;
    }
  } finally {
    fs.closeSync(fd);
  }
}
