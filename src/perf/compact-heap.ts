import v8 from 'node:v8';
import vm from 'node:vm';

/**
 * One full garbage collection that compacts the heap and gives the young generation back: once
 * start-up is done and the server quiet (after it listens), and after a burst of runs
 * (compact-when-idle.ts).
 *
 * Start-up promotes what it keeps (records, indexes, compiled modules) together with what it only
 * used (the snapshot's parsed lines and entries, summaries, module sources being linked), in the
 * same old-space pages, and V8 grows the young generation on the way. V8's own full collections
 * then free the garbage but keep most of those pages, each partly used, and the young generation
 * as grown, and an idle server allocates nothing that would trigger another: the JS heap kept pages well beyond its live objects for as long as it
 * idled, a quarter of a 10,000-conversation server's RSS (bench/RESULTS.md, "Tricks measured").
 *
 * Node has no API for it. The inspector's HeapProfiler.collectGarbage (in process: no port is
 * opened) is V8's low-memory notification: full collections that compact and shrink the young
 * generation. Where there is no inspector, the `gc` function V8 exposes with --expose-gc is taken
 * from a fresh context (the flag is set only for that), with --compact-on-every-full-gc set only
 * for this collection (the young generation stays as it is). Where V8 hands over neither, nothing
 * happens. Resolves to whether a collection ran.
 */
export async function compactHeap(): Promise<boolean> {
  if (await lowMemoryCollection()) return true;
  v8.setFlagsFromString('--expose-gc');
  let gc: unknown;
  try {
    gc = vm.runInNewContext('typeof gc === "function" ? gc : undefined');
  } finally {
    v8.setFlagsFromString('--no-expose-gc');
  }
  // A V8 that no longer exposes it this way: the heap stays as V8 left it, the server runs all the same.
  if (typeof gc !== 'function') return false;
  v8.setFlagsFromString('--compact-on-every-full-gc');
  try {
    gc();
  } finally {
    v8.setFlagsFromString('--no-compact-on-every-full-gc');
  }
  return true;
}

/** HeapProfiler.collectGarbage through an in-process inspector session; false where Node has no inspector or it refused. */
async function lowMemoryCollection(): Promise<boolean> {
  let session: import('node:inspector').Session;
  try {
    const { Session } = await import('node:inspector');
    session = new Session();
    session.connect();
  } catch {
    return false;
  }
  try {
    await new Promise<void>((resolve, reject) => session.post('HeapProfiler.collectGarbage', (error) => (error ? reject(error) : resolve())));
    return true;
  } catch {
    return false;
  } finally {
    session.disconnect();
  }
}
