/**
 * A module loaded at its first use rather than at start-up: optional, heavy dependencies (the
 * OpenAI and MCP SDKs, execa, PostgreSQL, NATS, undici, turndown, ...) cost a server that never
 * uses them neither start-up time nor memory (P4). The returned function loads once; a failed
 * load is tried again at the next call. In the single binary (one esbuild bundle) a dynamic
 * import of a bundled module is the same deferred evaluation.
 */
export function lazyModule<T>(load: () => Promise<T>): () => Promise<T> {
  let loading: Promise<T> | undefined;
  return () =>
    (loading ??= load().catch((error: unknown) => {
      loading = undefined;
      throw error;
    }));
}
