import { randomUUID } from 'node:crypto';
import dns from 'node:dns';
import { isIP } from 'node:net';
import { webhookHeaders } from '../../core/webhooks/webhook-signature.js';
import type { WebhookTargets } from '../../core/webhooks/webhook-targets.js';
import { checkedLookup } from '../webhooks/undici-webhook-client.js';
import { LazyAgent } from '../web/lazy-undici.js';

/** The most of a hook receiver's answer that is read (decision JSON is small). */
const MAX_RESPONSE_BYTES = 256 * 1024;

/**
 * POSTs hook events to `http` hooks, signed like webhooks (Standard Webhooks headers), and reads
 * the decision JSON from the response. The same address policy as webhooks applies (loopback and
 * private networks only when AGENTD_WEBHOOK_ALLOW_PRIVATE / _ALLOW_CIDRS allow them).
 */
export class UndiciHookClient {
  private readonly agent: LazyAgent;

  constructor(private readonly options: { targets: WebhookTargets; userAgent: string; resolve?: typeof dns.lookup }) {
    this.agent = new LazyAgent({ connect: { lookup: checkedLookup(options.targets, options.resolve ?? dns.lookup) }, keepAliveTimeout: 4_000 });
  }

  async post(hook: { url: string; body: string; secret: string | null; timeoutMs: number; signal: AbortSignal }): Promise<{ status: number | null; body: string; error: string | null }> {
    const host = new URL(hook.url).hostname.replace(/^\[|\]$/g, '');
    const refusal = isIP(host) ? this.options.targets.refusal(host) : null;
    if (refusal !== null) return { status: null, body: '', error: `refused: ${refusal}` };
    // The one deadline of the whole exchange (answer and body): undici's own headers and body
    // timeouts, set to the same length, raced it and could win under load, and the hook's failure
    // then read "Headers Timeout Error" instead of saying it timed out (a CI run of hooks.test.ts).
    const timeout = AbortSignal.timeout(hook.timeoutMs);
    const headers = webhookHeaders({ id: `hook_${randomUUID()}`, timestamp: Math.floor(Date.now() / 1000), body: hook.body, secret: hook.secret, userAgent: this.options.userAgent });
    try {
      const { agent, request } = await this.agent.use();
      const response = await request(hook.url, { dispatcher: agent, method: 'POST', headers, body: hook.body, signal: AbortSignal.any([timeout, hook.signal]) });
      let size = 0;
      const chunks: Buffer[] = [];
      for await (const chunk of response.body) {
        size += (chunk as Buffer).length;
        if (size > MAX_RESPONSE_BYTES) {
          response.body.destroy();
          return { status: response.statusCode, body: '', error: `the response is larger than ${MAX_RESPONSE_BYTES} bytes` };
        }
        chunks.push(chunk as Buffer);
      }
      return { status: response.statusCode, body: Buffer.concat(chunks).toString('utf8'), error: null };
    } catch (error) {
      if (timeout.aborted) return { status: null, body: '', error: `timed out after ${hook.timeoutMs / 1000} s` };
      if (hook.signal.aborted) return { status: null, body: '', error: 'aborted' };
      return { status: null, body: '', error: (error as Error).message };
    }
  }

  async close(): Promise<void> {
    await this.agent.destroy();
  }
}
