import { LazyAgent } from './lazy-undici.js';
import { WebSearchError, type SearchResult, type WebSearcher } from '../../core/tools/web-search.js';

export interface SearchProviderConfig {
  provider: 'tavily' | 'brave' | 'searxng';
  apiKey: string | null;
  url: string | null;
}

const DEFAULT_URLS = { tavily: 'https://api.tavily.com', brave: 'https://api.search.brave.com' } as const;
const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

/**
 * web_search through the operator's provider, over undici:
 * - Tavily: `POST /search` with `Authorization: Bearer <key>` and `{query, max_results}`; `results[]` of `{title, url, content}`.
 * - Brave: `GET /res/v1/web/search?q=&count=` with `X-Subscription-Token: <key>`; `web.results[]` of `{title, url, description}`.
 * - SearXNG: `GET /search?q=&format=json` on the operator's instance; `results[]` of `{title, url, content}`.
 * The key is sent only in its header and never appears in what comes back (errors included).
 */
export class ProviderWebSearcher implements WebSearcher {
  readonly provider: string;
  private readonly agent: LazyAgent;
  private readonly base: string;

  constructor(private readonly config: SearchProviderConfig & { timeoutMs: number; userAgent: string }) {
    this.provider = config.provider;
    this.base = (config.url ?? (config.provider === 'searxng' ? '' : DEFAULT_URLS[config.provider])).replace(/\/+$/, '');
    this.agent = new LazyAgent({ headersTimeout: config.timeoutMs, bodyTimeout: config.timeoutMs, connect: { timeout: config.timeoutMs }, keepAliveTimeout: 10_000 });
  }

  async search(search: { query: string; maxResults: number; signal: AbortSignal }): Promise<SearchResult[]> {
    const timeout = AbortSignal.timeout(this.config.timeoutMs);
    const signal = AbortSignal.any([timeout, search.signal]);
    const key = this.config.apiKey ?? '';
    const common = { 'user-agent': this.config.userAgent, accept: 'application/json' };
    try {
      switch (this.config.provider) {
        case 'tavily': {
          const body = await this.call(`${this.base}/search`, { method: 'POST', headers: { ...common, 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: JSON.stringify({ query: search.query, max_results: search.maxResults, search_depth: 'basic' }), signal });
          return list(body, 'results').slice(0, search.maxResults).map((item) => result(item.title, item.url, item.content));
        }
        case 'brave': {
          const query = new URLSearchParams({ q: search.query, count: String(search.maxResults) });
          const body = await this.call(`${this.base}/res/v1/web/search?${query}`, { method: 'GET', headers: { ...common, 'x-subscription-token': key }, signal });
          return list((body as { web?: unknown }).web, 'results').slice(0, search.maxResults).map((item) => result(item.title, item.url, stripTags(item.description)));
        }
        case 'searxng': {
          const query = new URLSearchParams({ q: search.query, format: 'json' });
          const body = await this.call(`${this.base}/search?${query}`, { method: 'GET', headers: common, signal });
          return list(body, 'results').slice(0, search.maxResults).map((item) => result(item.title, item.url, item.content));
        }
      }
    } catch (error) {
      if (error instanceof WebSearchError) throw new WebSearchError(this.masked(error.message));
      if (search.signal.aborted) throw new WebSearchError('interrupted: the run was stopped');
      if (timeout.aborted) throw new WebSearchError(`the ${this.provider} search timed out after ${this.config.timeoutMs / 1000} s`);
      throw new WebSearchError(this.masked(`the ${this.provider} search failed: ${(error as Error).message}`));
    }
  }

  async close(): Promise<void> {
    await this.agent.destroy();
  }

  private async call(url: string, options: { method: 'GET' | 'POST'; headers: Record<string, string>; body?: string; signal: AbortSignal }): Promise<unknown> {
    const { agent, request } = await this.agent.use();
    const response = await request(url, { dispatcher: agent, ...options });
    const text = await readText(response.body);
    if (response.statusCode < 200 || response.statusCode >= 300) {
      throw new WebSearchError(`the ${this.provider} search answered ${response.statusCode}${text ? `: ${text.slice(0, 300)}` : ''}`);
    }
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new WebSearchError(`the ${this.provider} search answered something that is not JSON`);
    }
  }

  /** A provider may quote the key it was given: never pass it on. */
  private masked(text: string): string {
    return this.config.apiKey ? text.split(this.config.apiKey).join('<search key>') : text;
  }
}

type Item = { title?: unknown; url?: unknown; content?: unknown; description?: unknown };

function list(body: unknown, field: string): Item[] {
  const items = typeof body === 'object' && body !== null ? (body as Record<string, unknown>)[field] : undefined;
  return Array.isArray(items) ? items.filter((item): item is Item => typeof item === 'object' && item !== null && typeof (item as Item).url === 'string') : [];
}

function result(title: unknown, url: unknown, snippet: unknown): SearchResult {
  return { title: typeof title === 'string' ? title : '', url: String(url), snippet: typeof snippet === 'string' ? snippet : '' };
}

/** Brave marks the matched words with <strong>; entities stay few. */
function stripTags(text: unknown): string {
  if (typeof text !== 'string') return '';
  return text.replace(/<[^>]+>/g, '').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
}

async function readText(body: AsyncIterable<Buffer> & { destroy(): void }): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > MAX_RESPONSE_BYTES) {
      body.destroy();
      throw new WebSearchError(`the answer is larger than ${MAX_RESPONSE_BYTES} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
