import { Agent, request } from 'undici';
import type { WebhookClient, WebhookRequest, WebhookResponse } from '../core/webhooks/webhook-client.js';

/** How much of a receiver's response body is read (and thrown away) before the connection is reused. */
const MAX_DRAINED_BYTES = 64 * 1024;

/**
 * Webhook POSTs over one shared undici Agent (a connection pool per receiver origin, kept alive
 * across subscriptions). Each attempt is bounded by `timeoutMs` as a whole, and by the same limit
 * on connecting, on the response headers and between body chunks. Redirects are never followed:
 * undici's `request` does not, so a 3xx comes back as a status like any other.
 */
export class UndiciWebhookClient implements WebhookClient {
  private readonly agent: Agent;
  private readonly timeoutMs: number;

  constructor(options: { timeoutMs: number }) {
    this.timeoutMs = options.timeoutMs;
    this.agent = new Agent({
      connect: { timeout: options.timeoutMs },
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      keepAliveTimeout: 4_000,
    });
  }

  async post(webhook: WebhookRequest): Promise<WebhookResponse> {
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const signal = AbortSignal.any([timeout, webhook.signal]);
    try {
      const response = await request(webhook.url, { dispatcher: this.agent, method: 'POST', headers: webhook.headers, body: webhook.body, signal });
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
