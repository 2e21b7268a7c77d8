import fs from 'node:fs';

/** Writes `file` until its filesystem refuses (ENOSPC): 64 KiB at a time, then 4 KiB, then single bytes. */
export function fillFilesystem(file: string): void {
  const fd = fs.openSync(file, 'w');
  try {
    for (const size of [65_536, 4096, 1]) {
      const chunk = Buffer.alloc(size, 0x78);
      for (;;) {
        try {
          fs.writeSync(fd, chunk);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'ENOSPC') break;
          throw error;
        }
      }
    }
  } finally {
    fs.closeSync(fd);
  }
}
