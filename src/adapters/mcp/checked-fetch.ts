import dns from 'node:dns';
import { isIP } from 'node:net';
import type { Agent } from 'undici';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { WebhookTargets } from '../../core/webhooks/webhook-targets.js';
import { loadUndici } from '../web/lazy-undici.js';
import { checkedLookup } from '../webhooks/undici-webhook-client.js';

type Undici = typeof import('undici');

/**
 * The HTTP client of remote MCP servers: every connection, whatever the SDK asks for (the first
 * POST, the event stream, a redirect, the endpoint an SSE server names), is checked against the
 * address policy when it is made, on the address it is made to. A check apart from the
 * connection (a lookup, then the SDK's own) let a name answer a public address to the check and
 * 127.0.0.1 to the connection.
 */
export class CheckedMcpFetch {
  private made: Promise<{ agent: Agent; fetch: Undici['fetch'] }> | undefined;
  private closed = false;

  /** `resolve`: how host names become addresses (dns.lookup; tests give their own). */
  constructor(private readonly options: { targets: WebhookTargets; connectTimeoutMs: number; resolve?: typeof dns.lookup }) {}

  /** A fetch for one connection attempt; `onRefused` hears each refusal (the SDK wraps the errors it sees). */
  forAttempt(onRefused: (reason: string) => void): FetchLike {
    return async (url, init) => {
      const { agent, fetch } = await this.use();
      try {
        const response = await fetch(url, { ...(init as Parameters<Undici['fetch']>[1]), dispatcher: agent });
        return response as unknown as Response;
      } catch (error) {
        const refusal = refusalOf(error);
        if (refusal !== null) onRefused(refusal);
        throw error;
      }
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    const made = this.made;
    if (made) await made.then(({ agent }) => agent.destroy(), () => undefined);
  }

  private use(): Promise<{ agent: Agent; fetch: Undici['fetch'] }> {
    if (this.closed) return Promise.reject(new Error('the MCP HTTP client is closed'));
    return (this.made ??= loadUndici().then(
      (undici) => {
        const { targets, connectTimeoutMs } = this.options;
        const connectChecked = undici.buildConnector({ timeout: connectTimeoutMs, lookup: checkedLookup(targets, this.options.resolve ?? dns.lookup) });
        const agent = new undici.Agent({
          // A literal address is connected to without a lookup: checked here, at the same moment.
          connect: (connectOptions, callback) => {
            const host = connectOptions.hostname.replace(/^\[|\]$/g, '');
            const refusal = isIP(host) ? targets.refusal(host) : null;
            if (refusal !== null) return callback(Object.assign(new Error(`refused: ${refusal}`), { code: 'EREFUSEDTARGET' }), null);
            return connectChecked(connectOptions, callback);
          },
        });
        return { agent, fetch: undici.fetch };
      },
      (error: unknown) => {
        this.made = undefined;
        throw error;
      },
    ));
  }
}

/** The refusal's message when `error` (or what caused it) is the address policy's, else null. */
function refusalOf(error: unknown): string | null {
  for (let current = error as { code?: unknown; message?: unknown; cause?: unknown } | undefined, depth = 0; current && depth < 5; current = current.cause as typeof current, depth++) {
    if (current.code === 'EREFUSEDTARGET' && typeof current.message === 'string') return current.message;
  }
  return null;
}
