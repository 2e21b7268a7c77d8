/**
 * Preloaded into a server process (`node --import memory-report.mjs dist/cli.js`): on SIGUSR2 it
 * appends the process's memory by kind (process.memoryUsage and V8's heap spaces) as one JSON
 * line to the file named by AGENTD_BENCH_MEMORY_FILE, so a benchmark can tell a growing live
 * heap from heap reserved, external buffers or the allocator. Started with --expose-gc, it also
 * reports the heap and the external memory left after a full collection (what stays, whatever the
 * collector's timing).
 */
import fs from 'node:fs';
import v8 from 'node:v8';

const file = process.env.AGENTD_BENCH_MEMORY_FILE;
if (file) {
  process.on('SIGUSR2', () => {
    const usage = process.memoryUsage();
    const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map((space) => [space.space_name, { size: space.space_size, used: space.space_used_size }]));
    // With --expose-gc: the heap still reachable after a full collection (read after the figures above, which it would move).
    const gc = (globalThis as { gc?: () => void }).gc;
    let liveAfterGc: number | null = null;
    let externalAfterGc: number | null = null;
    if (gc) {
      gc();
      const after = process.memoryUsage();
      liveAfterGc = after.heapUsed;
      externalAfterGc = after.external;
    }
    fs.appendFileSync(file, `${JSON.stringify({ ...usage, spaces, liveAfterGc, externalAfterGc })}\n`);
  });
}
