import dns from 'node:dns';
import { WebFetchError, type FetchedPage, type WebFetcher } from '../../core/tools/web-fetch.js';
import { WebhookTargets } from '../../core/webhooks/webhook-targets.js';
import { checkedLookup } from '../webhooks/undici-webhook-client.js';
import { LazyAgent } from './lazy-undici.js';
import { HtmlConverter, type HtmlLimits } from './html-converter.js';

const MAX_REDIRECTS = 5;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

/**
 * web_fetch's HTTP side. The fetch runs in the server's process, so where it may go is decided
 * here (SSRF): a conversation with `sandbox.network: "host"` may reach anything its shell can;
 * one with the normal network (true) only public addresses, checked on the literal host of every
 * hop and on what a name resolves to when the connection is made (DNS cannot point a public name
 * at 127.0.0.1 or 169.254.169.254 later), unless AGENTD_WEB_FETCH_ALLOW_PRIVATE / _ALLOW_CIDRS
 * lift it. No credentials ever: only a user agent and an accept header are sent, no cookie is
 * kept between redirects, and redirects are followed by hand (a bounded number, each checked).
 */
export class UndiciWebFetcher implements WebFetcher {
  private readonly targets: WebhookTargets;
  private readonly publicAgent: LazyAgent;
  private readonly hostAgent: LazyAgent;
  private readonly converter: HtmlConverter;

  constructor(private readonly options: { allowPrivate: boolean; allowCidrs: readonly string[]; timeoutMs: number; html: HtmlLimits; userAgent: string; resolve?: typeof dns.lookup }) {
    this.converter = new HtmlConverter(options.html);
    this.targets = new WebhookTargets({ allowPrivate: options.allowPrivate, allowCidrs: options.allowCidrs });
    const common = { headersTimeout: options.timeoutMs, bodyTimeout: options.timeoutMs, keepAliveTimeout: 4_000 };
    this.publicAgent = new LazyAgent({ ...common, connect: { timeout: options.timeoutMs, lookup: checkedLookup(this.targets, options.resolve ?? dns.lookup) } });
    this.hostAgent = new LazyAgent({ ...common, connect: { timeout: options.timeoutMs } });
  }

  async fetch(fetchRequest: { url: string; maxBytes: number; network: true | 'host'; signal: AbortSignal }): Promise<FetchedPage> {
    const timeout = AbortSignal.timeout(this.options.timeoutMs);
    const signal = AbortSignal.any([timeout, fetchRequest.signal]);
    let url = parseUrl(fetchRequest.url);
    try {
      const { agent: dispatcher, request } = await (fetchRequest.network === 'host' ? this.hostAgent : this.publicAgent).use();
      for (let redirects = 0; ; redirects++) {
        if (fetchRequest.network !== 'host') {
          const refusal = this.targets.urlRefusal(url);
          if (refusal !== null) throw new WebFetchError('refused', `refused: ${refusalText(refusal)}`);
        }
        const response = await request(url, {
          dispatcher,
          method: 'GET',
          headers: { 'user-agent': this.options.userAgent, accept: 'text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.5', 'accept-encoding': 'identity' },
          signal,
        });
        const location = response.headers.location;
        if (REDIRECT_STATUSES.has(response.statusCode) && typeof location === 'string') {
          await response.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
          if (redirects >= MAX_REDIRECTS) throw new WebFetchError('too_many_redirects', `more than ${MAX_REDIRECTS} redirects (last to ${location})`);
          url = parseUrl(location, url);
          continue;
        }
        const { bytes, truncated } = await readCapped(response.body, fetchRequest.maxBytes);
        const contentType = headerText(response.headers['content-type']);
        return { url: url.href, status: response.statusCode, contentType, bytes: bytes.length, truncated, redirects, ...(await this.render(bytes, contentType, fetchRequest.signal)) };
      }
    } catch (error) {
      if (error instanceof WebFetchError) throw error;
      if (fetchRequest.signal.aborted) throw new WebFetchError('failed', 'interrupted: the run was stopped');
      if (timeout.aborted) throw new WebFetchError('timeout', `timed out after ${this.options.timeoutMs / 1000} s`);
      const code = (error as { code?: string }).code;
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      if (code === 'EREFUSEDTARGET' || cause?.code === 'EREFUSEDTARGET') throw new WebFetchError('refused', refusalText((cause?.code === 'EREFUSEDTARGET' ? cause.message : (error as Error).message) ?? 'refused'));
      throw new WebFetchError('failed', `the request failed: ${(error as Error).message}${code ? ` (${code})` : ''}`);
    }
  }

  async close(): Promise<void> {
    await Promise.all([this.publicAgent.destroy(), this.hostAgent.destroy(), this.converter.close()]);
  }

  /** HTML becomes Markdown in a worker (at most its first html.maxBytes); text passes through. */
  private async render(bytes: Buffer, contentType: string | null, signal: AbortSignal): Promise<Pick<FetchedPage, 'format' | 'title' | 'text' | 'cut'>> {
    const mime = contentType?.split(';')[0]?.trim().toLowerCase() ?? '';
    const text = decode(bytes, contentType);
    const looksHtml = mime === '' && /^\s*(<!doctype html|<html)/i.test(text.slice(0, 1024));
    if (mime === 'text/html' || mime === 'application/xhtml+xml' || looksHtml) {
      const limit = this.options.html.maxBytes;
      const over = bytes.length > limit;
      const page = await this.converter.convert(over ? decode(bytes.subarray(0, limit), contentType) : text, signal);
      const cut = over && page.cut === null ? `HTML longer than ${limit} bytes; only its start is converted` : page.cut;
      return { format: 'markdown', title: page.title, text: page.markdown, cut };
    }
    if (TEXT_TYPES.test(mime) || (mime === '' && !text.includes('\u0000') && !text.includes('\uFFFD'))) return { format: 'text', title: null, text, cut: null };
    return { format: 'binary', title: null, text: '', cut: null };
  }
}

/** The webhook policy's sentence, with web_fetch's own switch named. */
function refusalText(refusal: string): string {
  return refusal.replace(/\(set AGENTD_WEBHOOK_ALLOW_PRIVATE=true[^)]*\)/, '(this conversation may reach public addresses only; the operator can allow more with AGENTD_WEB_FETCH_ALLOW_PRIVATE or AGENTD_WEB_FETCH_ALLOW_CIDRS)');
}

function parseUrl(text: string, base?: URL): URL {
  let url: URL;
  try {
    url = new URL(text, base);
  } catch {
    throw new WebFetchError('invalid_url', 'not a valid URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new WebFetchError('invalid_url', `only http and https URLs can be fetched, not ${url.protocol}`);
  if (url.username || url.password) throw new WebFetchError('invalid_url', 'URLs with credentials in them are not fetched');
  return url;
}

function headerText(value: string | string[] | undefined): string | null {
  return (Array.isArray(value) ? value[0] : value) ?? null;
}

async function readCapped(body: AsyncIterable<Buffer> & { destroy(): void }, maxBytes: number): Promise<{ bytes: Buffer; truncated: boolean }> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    if (size + chunk.length > maxBytes) {
      chunks.push(chunk.subarray(0, maxBytes - size));
      body.destroy();
      return { bytes: Buffer.concat(chunks), truncated: true };
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  return { bytes: Buffer.concat(chunks), truncated: false };
}

const TEXT_TYPES = /^(text\/|application\/(json|[\w.+-]+\+json|xml|[\w.+-]+\+xml|javascript|ecmascript|x-yaml|yaml|toml|x-sh|sql|graphql|x-ndjson))/i;

function decode(bytes: Buffer, contentType: string | null): string {
  const charset = /charset="?([\w.:-]+)"?/i.exec(contentType ?? '')?.[1];
  try {
    return new TextDecoder(charset ?? 'utf-8').decode(bytes);
  } catch {
    return new TextDecoder('utf-8').decode(bytes);
  }
}
