import { z } from 'zod';
import { loadDescription } from './load-description.js';
import { defineTool, type ToolDefinition } from './tool.js';

export const WEB_FETCH_TOOL_NAME = 'web_fetch';
export const DEFAULT_FETCH_BYTES = 2 * 1024 * 1024;
export const MAX_FETCH_BYTES = 10 * 1024 * 1024;

/** One page as the fetcher read it. */
export interface FetchedPage {
  /** The final URL, after redirects. */
  url: string;
  status: number;
  contentType: string | null;
  /** `markdown`: converted from HTML; `text`: passed through; `binary`: not shown. */
  format: 'markdown' | 'text' | 'binary';
  title: string | null;
  text: string;
  /** Bytes downloaded (at most max_bytes). */
  bytes: number;
  /** The body went on past max_bytes: `text` holds its start. */
  truncated: boolean;
  redirects: number;
  /** The conversion left part of the page out (a limit on its size, nesting, elements or time): what and why. */
  cut: string | null;
}

/** Why a fetch did not happen or failed, in words the model can act on. */
export class WebFetchError extends Error {
  constructor(
    readonly code: 'refused' | 'invalid_url' | 'timeout' | 'too_many_redirects' | 'failed',
    message: string,
  ) {
    super(message);
    this.name = 'WebFetchError';
  }
}

/** The outside world's side of web_fetch (adapters/undici-web-fetcher.ts). */
export interface WebFetcher {
  fetch(request: { url: string; maxBytes: number; network: true | 'host'; signal: AbortSignal }): Promise<FetchedPage>;
}

export const webFetchParameters = z.object({
  url: z.string().min(1).max(8192).describe('The http(s) URL to read.'),
  max_bytes: z.int().min(1).max(MAX_FETCH_BYTES).optional().describe(`Download at most this many bytes (default ${DEFAULT_FETCH_BYTES}).`),
});

export function createWebFetchTool(fetcher: WebFetcher): ToolDefinition<typeof webFetchParameters> {
  return defineTool({
    name: WEB_FETCH_TOOL_NAME,
    description: loadDescription(import.meta.url, 'web-fetch.md'),
    parameters: webFetchParameters,
    async execute(input, context) {
      const network = context.network ?? true;
      if (network === false) {
        return { isError: true, content: 'Refused: this conversation has no network (its sandbox.network is false), so web_fetch cannot reach any URL.', data: { error: 'no_network' } };
      }
      try {
        const page = await fetcher.fetch({ url: input.url, maxBytes: input.max_bytes ?? DEFAULT_FETCH_BYTES, network, signal: context.signal });
        return { isError: page.status >= 400, content: describePage(page), data: { url: page.url, status: page.status, content_type: page.contentType, bytes: page.bytes, truncated: page.truncated, redirects: page.redirects, format: page.format, cut: page.cut } };
      } catch (error) {
        if (error instanceof WebFetchError) return { isError: true, content: `web_fetch ${input.url}: ${error.message}`, data: { error: error.code } };
        throw error;
      }
    },
  });
}

function describePage(page: FetchedPage): string {
  const facts = [`status ${page.status}`, page.contentType ?? 'no content type', `${page.bytes} bytes`];
  if (page.truncated) facts.push('cut at max_bytes');
  if (page.redirects > 0) facts.push(`after ${page.redirects} redirect(s)`);
  const head = [`URL: ${page.url} (${facts.join(', ')})`];
  if (page.title) head.push(`Title: ${page.title}`);
  const body = page.format === 'binary' ? `(binary content, not shown: ${page.contentType ?? 'unknown type'})` : page.text.trim() || (page.cut ? '(nothing shown)' : '(empty body)');
  const notes = [...(page.cut ? [`[page cut: ${page.cut}]`] : []), ...(page.truncated ? [`[... cut: the page is longer than ${page.bytes} bytes; raise max_bytes to read more]`] : [])];
  return `${head.join('\n')}\n\n${body}${notes.map((note) => `\n\n${note}`).join('')}`;
}
