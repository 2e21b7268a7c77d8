import type { Services } from '../compose.js';
import { loadLlmModules } from '../adapters/llm/index.js';
import { detectRipgrep } from '../adapters/search/index.js';

/**
 * How long after it listens the server warms up: its first answers (the /health a supervisor or a
 * client waits for, what a start is timed by) are not held behind the warm-up's module loading and
 * spawns, and the start-up compaction that follows (compact-when-idle.ts) frees what it left.
 */
export const WARM_UP_AFTER_MS = 100;

/**
 * The server's warm-up: what a fresh server's first conversation would otherwise start on its own
 * path, started while the server is idle after its start (bench/RESULTS.md, P20, a fresh server's
 * new conversation): the shells kept for the next new conversations, and with them the spawner
 * and the sandbox's first start, rather than at the first creation; the LLM client's modules
 * for the default model, rather than at the first request; and grep's look for ripgrep, rather than
 * at its first search (ripgrep-searcher.ts). Only on a server with a default LLM: a
 * conversation created with its defaults can run there. It starts nothing a first conversation
 * would not start: warm shells that nobody takes go after AGENTD_IDLE_TIMEOUT_S, as always.
 */
export function warmUp(services: Services): void {
  const { defaultLlm } = services.config;
  if (!defaultLlm) return;
  services.warmShells?.prime();
  // A load that fails is tried again, and reported, by the first request (lazyModule).
  void loadLlmModules(defaultLlm).catch(() => undefined);
  void detectRipgrep();
}
