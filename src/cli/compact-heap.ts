import v8 from 'node:v8';
import vm from 'node:vm';

/**
 * One full garbage collection that compacts every page: once start-up is done and the server
 * quiet (after it listens), and after a burst of runs (compact-when-idle.ts).
 *
 * Start-up promotes what it keeps (records, indexes, compiled modules) together with what it only
 * used (the snapshot's parsed lines and entries, summaries, module sources being linked), in the
 * same old-space pages. V8's own full collections then free the garbage but keep most of those
 * pages, each partly used, and an idle server allocates nothing that would trigger another: with
 * 10,000 conversations the JS heap kept ~48-55 MiB of pages for ~35 MiB of live objects for as
 * long as it idled. Compacted once, it keeps ~40.
 *
 * Node has no API for it: the `gc` function V8 exposes with --expose-gc is taken from a fresh
 * context (the flag is set only for that), and --compact-on-every-full-gc is set only for this
 * collection. Returns whether it ran: where V8 does not hand `gc` over this way, nothing happens.
 */
export function compactHeap(): boolean {
  v8.setFlagsFromString('--expose-gc');
  let gc: unknown;
  try {
    gc = vm.runInNewContext('typeof gc === "function" ? gc : undefined');
  } finally {
    v8.setFlagsFromString('--no-expose-gc');
  }
  // A V8 that no longer exposes it this way: the heap stays as V8 left it, the server starts all the same.
  if (typeof gc !== 'function') return false;
  v8.setFlagsFromString('--compact-on-every-full-gc');
  try {
    gc();
  } finally {
    v8.setFlagsFromString('--no-compact-on-every-full-gc');
  }
  return true;
}
