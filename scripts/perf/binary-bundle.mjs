// PERF: how the single executable's bundle is written (build-binary.mjs); measured in
// bench/RESULTS.md ("Tricks measured"). test/cli/binary.test.ts holds the bundle to it.

/**
 * Without whitespace and comments: the server keeps the whole bundle's source in memory, and the
 * comments of some packages hold characters beyond Latin-1, which made V8 keep all of it at two
 * bytes a character. Names are kept, so a stack trace still says which function.
 */
export const BINARY_BUNDLE_OPTIONS = { minifyWhitespace: true };
