import { PassThrough } from 'node:stream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { startLocalSite, type LocalSite } from '../support/local-site.js';

/**
 * Local fakes of the three providers' HTTP APIs on 127.0.0.1, answering in each one's documented
 * shape (Tavily POST /search, Brave GET /res/v1/web/search, SearXNG GET /search?format=json), and
 * only when the request carries the key the way the provider wants it.
 */
const KEY = 'search-key-never-shown-7f3a';

function startProviders(): Promise<LocalSite> {
  return startLocalSite((req, res) => {
    const url = new URL(req.path, 'http://127.0.0.1');
    const json = (status: number, value: unknown) => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
    if (req.method === 'POST' && url.pathname === '/tavily/search') {
      if (req.headers.authorization !== `Bearer ${KEY}`) return json(401, { detail: { error: `Unauthorized: invalid API key ${req.headers.authorization ?? ''}` } });
      const { query, max_results } = JSON.parse(req.body) as { query: string; max_results: number };
      return json(200, {
        query,
        answer: null,
        results: [
          { title: 'Tavily first', url: 'https://one.example/tavily', content: `About ${query}`, score: 0.9, raw_content: null },
          { title: 'Tavily second', url: 'https://two.example/tavily', content: 'More', score: 0.5, raw_content: null },
        ].slice(0, max_results),
        response_time: 0.4,
      });
    }
    if (req.method === 'GET' && url.pathname === '/brave/res/v1/web/search') {
      if (req.headers['x-subscription-token'] !== KEY) return json(401, { type: 'ErrorResponse', error: { code: 'SUBSCRIPTION_TOKEN_INVALID', status: 401 } });
      return json(200, {
        type: 'search',
        query: { original: url.searchParams.get('q') },
        web: { type: 'search', results: [{ title: 'Brave result', url: 'https://brave.example/page', description: `The <strong>${url.searchParams.get('q')}</strong> page &amp; more`, type: 'search_result' }] },
      });
    }
    if (req.method === 'GET' && url.pathname === '/searx/search') {
      if (url.searchParams.get('format') !== 'json') return void res.writeHead(403).end('format not allowed');
      return json(200, { query: url.searchParams.get('q'), number_of_results: 1, results: [{ url: 'https://searx.example/hit', title: 'SearXNG hit', content: 'found by searx', engine: 'duckduckgo' }], answers: [], suggestions: [] });
    }
    res.writeHead(404).end();
  });
}

let providers: LocalSite;
let harness: AgentHarness | undefined;
beforeAll(async () => {
  providers = await startProviders();
});
afterAll(async () => providers?.close());
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const toolNames = (h: AgentHarness) => (h.llm.requests[0]!.body.tools ?? []).map((tool) => tool.function.name);

async function searchOnce(env: Record<string, string>, query: string): Promise<{ observation: any; events: any[]; log: string }> {
  const logStream = new PassThrough();
  let log = '';
  logStream.on('data', (chunk: Buffer) => (log += chunk.toString('utf8')));
  harness = await startAgentHarness([{ toolCalls: [{ name: 'web_search', arguments: { query, max_results: 5 } }] }, { text: 'searched' }], { env, logStream });
  const id = await harness.createConversation({ initial_message: 'look it up' });
  await harness.waitForStatus(id, ['idle']);
  const events = await harness.events(id);
  return { observation: events.find((event) => event.kind === 'observation'), events, log };
}

describe('web_search', () => {
  it('needs what its provider needs, checked at start-up', () => {
    expect(() => loadConfig({ AGENTD_SEARCH_PROVIDER: 'tavily' })).toThrow('AGENTD_SEARCH_PROVIDER=tavily needs AGENTD_SEARCH_API_KEY');
    expect(() => loadConfig({ AGENTD_SEARCH_PROVIDER: 'searxng' })).toThrow(/AGENTD_SEARCH_PROVIDER=searxng needs AGENTD_SEARCH_URL/);
    expect(() => loadConfig({ AGENTD_SEARCH_API_KEY: 'k' })).toThrow(/AGENTD_SEARCH_PROVIDER is not/);
    expect(() => loadConfig({ AGENTD_SEARCH_PROVIDER: 'bing', AGENTD_SEARCH_API_KEY: 'k' })).toThrow(/invalid AGENTD_SEARCH_PROVIDER/);
    expect(loadConfig({ AGENTD_SEARCH_PROVIDER: 'brave', AGENTD_SEARCH_API_KEY: 'k' }).web.search).toEqual({ provider: 'brave', apiKey: 'k', url: null });
  });

  it('is not offered without a provider', async () => {
    harness = await startAgentHarness([{ text: 'hi' }]);
    const id = await harness.createConversation({ initial_message: 'hi' });
    await harness.waitForStatus(id, ['idle']);
    expect(toolNames(harness)).not.toContain('web_search');
    expect(toolNames(harness)).toContain('web_fetch');
  });

  it('tavily: POST /search with the key as a bearer token', async () => {
    const { observation, events, log } = await searchOnce({ AGENTD_SEARCH_PROVIDER: 'tavily', AGENTD_SEARCH_API_KEY: KEY, AGENTD_SEARCH_URL: `${providers.url}/tavily` }, 'agentd release');
    expect(toolNames(harness!)).toContain('web_search');
    expect(observation).toMatchObject({ tool_name: 'web_search', is_error: false, data: { provider: 'tavily', results: 2 } });
    expect(observation.content).toBe('Results for: agentd release\n\n1. Tavily first\n   https://one.example/tavily\n   About agentd release\n\n2. Tavily second\n   https://two.example/tavily\n   More');
    const sent = providers.requests.at(-1)!;
    expect(JSON.parse(sent.body)).toMatchObject({ query: 'agentd release', max_results: 5 });
    expect(JSON.stringify(events)).not.toContain(KEY);
    expect(log).not.toContain(KEY);
    expect(JSON.stringify(harness!.llm.requests.map((request) => request.body))).not.toContain(KEY);
  });

  it('brave: GET /res/v1/web/search with X-Subscription-Token, tags stripped from descriptions', async () => {
    const { observation, events, log } = await searchOnce({ AGENTD_SEARCH_PROVIDER: 'brave', AGENTD_SEARCH_API_KEY: KEY, AGENTD_SEARCH_URL: `${providers.url}/brave` }, 'undici redirect');
    expect(observation.content).toContain('1. Brave result\n   https://brave.example/page\n   The undici redirect page & more');
    expect(providers.requests.at(-1)!.path).toBe('/brave/res/v1/web/search?q=undici+redirect&count=5');
    expect(JSON.stringify(events)).not.toContain(KEY);
    expect(log).not.toContain(KEY);
  });

  it('searxng: GET /search?format=json on the instance, no key needed', async () => {
    const { observation } = await searchOnce({ AGENTD_SEARCH_PROVIDER: 'searxng', AGENTD_SEARCH_URL: `${providers.url}/searx` }, 'turndown lists');
    expect(observation.content).toContain('1. SearXNG hit\n   https://searx.example/hit\n   found by searx');
    expect(providers.requests.at(-1)!.path).toBe('/searx/search?q=turndown+lists&format=json');
  });

  it('a provider that refuses the key is an error the model reads, the key masked even when the provider quotes it', async () => {
    const { observation, events, log } = await searchOnce({ AGENTD_SEARCH_PROVIDER: 'tavily', AGENTD_SEARCH_API_KEY: `${KEY}-wrong`, AGENTD_SEARCH_URL: `${providers.url}/tavily` }, 'anything');
    expect(observation).toMatchObject({ is_error: true, data: { error: 'search_failed' } });
    expect(observation.content).toContain('web_search failed: the tavily search answered 401');
    expect(observation.content).toContain('<search key>');
    expect(JSON.stringify(events)).not.toContain(KEY);
    expect(log).not.toContain(KEY);
  });
});
