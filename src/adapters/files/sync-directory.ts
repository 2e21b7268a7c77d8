import fs from 'node:fs';

/** A directory's entries (a file created, renamed or removed in it) made durable, as fsync does a file's bytes. */
export function syncDirectory(dir: string): void {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
