import { defineConfig } from 'vitest/config';

// Files that need a process of their own: they mock a built-in module for the code they import
// (auth-key-check), measure the process's own heap (compact-heap), watch a look-up that the
// first import of its module does once per process (start-up-ripgrep), or count on the key lists
// that this process has seen (conversation-index, user-keyed-records: user-keyed.ts shares hidden
// classes for at most 512 lists, and forgets the lists seen once at 4,096, which other files fill).
const ownProcess = ['test/http/auth-key-check.test.ts', 'test/perf/compact-heap.test.ts', 'test/cli/start-up-ripgrep.test.ts', 'test/events/conversation-index.test.ts', 'test/perf/user-keyed-records.test.ts'];

export default defineConfig({
  test: {
    // Each test file's temporary files in a directory of its own, removed after it (test/support/temp-root.ts).
    setupFiles: ['test/support/temp-root.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    maxWorkers: 2,
    projects: [
      // The rest share their worker's process, file after file: a fresh process per file cost
      // ~1.3 s of start and imports each on a 2-core machine (~3.5 of a 15-minute suite).
      // The setup file still runs for every file, so each keeps its own temp dir.
      { extends: true, test: { name: 'shared', include: ['test/**/*.test.ts'], exclude: ownProcess, isolate: false } },
      { extends: true, test: { name: 'isolated', include: ownProcess, isolate: true } },
    ],
  },
});
