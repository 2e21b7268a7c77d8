// PERF: how the single executable's file is put in place (build-binary.mjs); measured in
// bench/RESULTS.md ("Tricks measured").
import fs from 'node:fs';

/**
 * Copied, then renamed into place (`built` is in a work directory beside `output`): postject
 * writes the binary in one piece, which Linux may then cache in large blocks (ext4's large
 * folios), and a process run from it maps the whole block around each page it touches, so the
 * server and its spawner showed far more RSS than the same file installed by a copy, whose cache
 * is built of small blocks. The memory in use is the same page cache either way; what differs is
 * how much of it each process maps.
 */
export function placeBinary(built, output) {
  const copy = `${built}.copy`;
  fs.copyFileSync(built, copy);
  fs.renameSync(copy, output);
}
