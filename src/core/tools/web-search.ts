import { z } from 'zod';
import { loadDescription } from './load-description.js';
import { defineTool, type ToolDefinition } from './tool.js';

export const WEB_SEARCH_TOOL_NAME = 'web_search';
const DEFAULT_RESULTS = 8;

export interface SearchResult {
  title: string;
  url: string;
  snippet: string;
}

/** Why a search failed, in words the model can act on (never carrying the provider's key). */
export class WebSearchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebSearchError';
  }
}

/** The search provider behind web_search (adapters/web-search-providers.ts). */
export interface WebSearcher {
  readonly provider: string;
  search(request: { query: string; maxResults: number; signal: AbortSignal }): Promise<SearchResult[]>;
}

export const webSearchParameters = z.object({
  query: z.string().min(1).max(400).describe('What to search for.'),
  max_results: z.int().min(1).max(20).optional().describe(`How many results (default ${DEFAULT_RESULTS}).`),
});

/** Offered only when the server has a search provider (AGENTD_SEARCH_PROVIDER). */
export function createWebSearchTool(searcher: WebSearcher): ToolDefinition<typeof webSearchParameters> {
  return defineTool({
    name: WEB_SEARCH_TOOL_NAME,
    description: loadDescription(import.meta.url, 'web-search.md'),
    parameters: webSearchParameters,
    async execute(input, context) {
      if (context.network === false) {
        return { isError: true, content: 'Refused: this conversation has no network (its sandbox.network is false), so web_search is not available.', data: { error: 'no_network' } };
      }
      try {
        const results = await searcher.search({ query: input.query, maxResults: input.max_results ?? DEFAULT_RESULTS, signal: context.signal });
        if (results.length === 0) return { isError: false, content: `No results for: ${input.query}`, data: { provider: searcher.provider, results: 0 } };
        const lines = results.map((result, index) => `${index + 1}. ${result.title || result.url}\n   ${result.url}${result.snippet ? `\n   ${result.snippet.replace(/\s+/g, ' ').trim()}` : ''}`);
        return { isError: false, content: `Results for: ${input.query}\n\n${lines.join('\n\n')}`, data: { provider: searcher.provider, results: results.length, urls: results.map((result) => result.url) } };
      } catch (error) {
        if (error instanceof WebSearchError) return { isError: true, content: `web_search failed: ${error.message}`, data: { provider: searcher.provider, error: 'search_failed' } };
        throw error;
      }
    },
  });
}
