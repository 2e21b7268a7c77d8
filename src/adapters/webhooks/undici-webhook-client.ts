import dns, { type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { LazyAgent } from '../web/lazy-undici.js';
import type { WebhookTargets } from '../../core/webhooks/webhook-targets.js';
import type { WebhookClient, WebhookRequest, WebhookResponse } from '../../core/webhooks/webhook-client.js';

/** How much of a receiver's response body is read (and thrown away) before the connection is reused. */
const MAX_DRAINED_BYTES = 64 * 1024;

/**
 * Webhook POSTs over one shared undici Agent (a connection pool per receiver origin, kept alive
 * across subscriptions). Each attempt is bounded by `timeoutMs` as a whole, and by the same limit
 * on connecting, on the response headers and between body chunks. Redirects are never followed:
 * undici's `request` does not, so a 3xx comes back as a status like any other.
 */
export class UndiciWebhookClient implements WebhookClient {
  private readonly agent: LazyAgent;
  private readonly timeoutMs: number;

  private readonly targets: WebhookTargets;

  /** `resolve`: how host names become addresses (dns.lookup; tests give their own). */
  constructor(options: { timeoutMs: number; targets: WebhookTargets; resolve?: typeof dns.lookup }) {
    this.timeoutMs = options.timeoutMs;
    this.targets = options.targets;
    this.agent = new LazyAgent({
      // Every address a name resolves to is checked when the connection is made, so a name that
      // was public at creation cannot be pointed at this machine or its network later.
      connect: { timeout: options.timeoutMs, lookup: checkedLookup(options.targets, options.resolve ?? dns.lookup) },
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      keepAliveTimeout: 4_000,
    });
  }

  async post(webhook: WebhookRequest): Promise<WebhookResponse> {
    // A literal address is connected to without a lookup: checked here instead.
    const host = new URL(webhook.url).hostname.replace(/^\[|\]$/g, '');
    const refusal = isIP(host) ? this.targets.refusal(host) : null;
    if (refusal !== null) return { status: null, error: `refused: ${refusal}` };
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const signal = AbortSignal.any([timeout, webhook.signal]);
    try {
      const { agent, request } = await this.agent.use();
      const response = await request(webhook.url, { dispatcher: agent, method: 'POST', headers: webhook.headers, body: webhook.body, signal });
      // The status decides; the body is drained (bounded) so the connection can be reused.
      await response.body.dump({ limit: MAX_DRAINED_BYTES }).catch(() => undefined);
      return { status: response.statusCode, error: null };
    } catch (error) {
      if (timeout.aborted) return { status: null, error: `timed out after ${this.timeoutMs / 1000} s` };
      if (webhook.signal.aborted) return { status: null, error: 'aborted' };
      return { status: null, error: describe(error) };
    }
  }

  async close(): Promise<void> {
    await this.agent.destroy();
  }
}

function describe(error: unknown): string {
  const { code, message } = error as { code?: string; message?: string };
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT') return `timed out (${code})`;
  if (code === 'ECONNREFUSED') return 'connection refused (ECONNREFUSED)';
  const text = (message ?? String(error)).slice(0, 300);
  return code ? `${text} (${code})` : text;
}

/** A `lookup` for net.connect that fails when any address of the name is refused. */
export function checkedLookup(targets: WebhookTargets, resolve: typeof dns.lookup): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const list = addresses as unknown as LookupAddress[];
      for (const { address } of list) {
        const refusal = targets.refusal(address);
        if (refusal !== null) return callback(Object.assign(new Error(`refused: ${hostname} resolves to ${refusal}`), { code: 'EREFUSEDTARGET' }), '', 0);
      }
      if (options.all) return (callback as unknown as (error: null, addresses: LookupAddress[]) => void)(null, list);
      const first = list[0];
      if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 0);
      callback(null, first.address, first.family);
    });
  };
}
