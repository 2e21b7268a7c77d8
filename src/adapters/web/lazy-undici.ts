import type { Agent } from 'undici';
import { lazyModule } from '../../perf/lazy-module.js';

/** undici, heavy on the heap, loads at the first outgoing request (a webhook, a hook, a web tool), not at start-up. */
export const loadUndici = lazyModule(() => import('undici'));

type Undici = typeof import('undici');

/**
 * An undici Agent made at its first use: a server that never sends a webhook or fetches a page
 * neither loads undici nor has pools to tear down at shutdown.
 */
export class LazyAgent {
  private made: Promise<{ agent: Agent; request: Undici['request'] }> | undefined;
  private closed = false;

  constructor(private readonly options: Agent.Options) {}

  /** The agent and undici's `request`, made at the first call. */
  use(): Promise<{ agent: Agent; request: Undici['request'] }> {
    if (this.closed) return Promise.reject(new Error('the HTTP client is closed'));
    return (this.made ??= loadUndici().then(
      ({ Agent: AgentClass, request }) => ({ agent: new AgentClass(this.options), request }),
      (error: unknown) => {
        this.made = undefined;
        throw error;
      },
    ));
  }

  /** Destroys the agent if one was made (nothing to do otherwise). */
  async destroy(): Promise<void> {
    this.closed = true;
    const made = this.made;
    if (made) await made.then(({ agent }) => agent.destroy(), () => undefined);
  }
}
