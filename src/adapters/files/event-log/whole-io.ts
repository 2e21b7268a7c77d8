import fs from 'node:fs';

/** Up to `length` bytes at `position`, read through short reads; fewer only at the end of the file. */
export function readAt(fd: number, length: number, position: number): Buffer {
  const buffer = Buffer.allocUnsafe(length);
  let read = 0;
  while (read < length) {
    const n = fs.readSync(fd, buffer, read, length - read, position + read);
    if (n === 0) break;
    read += n;
  }
  return read === length ? buffer : buffer.subarray(0, read);
}

/** All of `buffer` at `position`, through short writes. */
export function writeAt(fd: number, buffer: Buffer, position: number): void {
  let written = 0;
  while (written < buffer.length) written += fs.writeSync(fd, buffer, written, buffer.length - written, position + written);
}

/** All of `buffer` at the file's offset (the end, for a file opened to append), through short writes. */
export function writeAll(fd: number, buffer: Buffer): void {
  let written = 0;
  while (written < buffer.length) written += fs.writeSync(fd, buffer, written, buffer.length - written);
}
