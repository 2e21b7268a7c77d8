import fs from 'node:fs';
import path from 'node:path';

/**
 * Append one line to a line-per-record file, all or nothing: a write cut short (the disk is full)
 * is truncated away, so that no partial line is left for the next append to continue. The file's
 * directory is made when it is missing (found by the open failing, not by a mkdir before every
 * append: run records and checkpoints append a line at every step).
 */
export function appendLine(file: string, line: string, options: { mode?: number; fsync?: boolean } = {}): void {
  const fd = openToAppend(file, options.mode ?? 0o600);
  try {
    writeLine(fd, line, options.fsync === true);
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * Files appended to a line at a time at every step of a run (its run record, its checkpoints),
 * each kept open between appends: an append is one `write` where `appendLine` also opens and
 * closes the file. At most `max` are open, the least recently used closed first. The owner closes
 * a file (`close`) before it removes it, when its conversation goes idle, and when another instance
 * may write it (cluster). A file removed by someone else meanwhile would take the appends into its
 * unlinked inode: only the conversation's own stores remove its files.
 */
export class AppendFiles {
  /** Open descriptors by path, least recently used first. */
  private readonly open = new Map<string, number>();

  constructor(private readonly options: { max: number; mode?: number }) {}

  append(file: string, line: string): void {
    let fd = this.open.get(file);
    if (fd === undefined) {
      fd = openToAppend(file, this.options.mode ?? 0o600);
      if (this.open.size >= this.options.max) this.close(this.open.keys().next().value!);
    } else this.open.delete(file);
    this.open.set(file, fd);
    try {
      writeLine(fd, line, false);
    } catch (error) {
      this.close(file);
      throw error;
    }
  }

  close(file: string): void {
    const fd = this.open.get(file);
    if (fd === undefined) return;
    this.open.delete(file);
    fs.closeSync(fd);
  }

  closeAll(): void {
    for (const file of [...this.open.keys()]) this.close(file);
  }

  get size(): number {
    return this.open.size;
  }
}

/** One line, all or nothing: a write cut short is truncated away (the file is only appended to by this process). */
function writeLine(fd: number, line: string, fsync: boolean): void {
  const bytes = Buffer.from(`${line}\n`, 'utf8');
  let written = 0;
  try {
    while (written < bytes.length) written += fs.writeSync(fd, bytes, written);
    if (fsync) fs.fsyncSync(fd);
  } catch (error) {
    // Only this process appends to the file: what this call wrote is the file's last `written` bytes.
    if (written > 0) fs.ftruncateSync(fd, fs.fstatSync(fd).size - written);
    throw error;
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
