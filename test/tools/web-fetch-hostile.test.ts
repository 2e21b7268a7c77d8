/**
 * web_fetch against pages built to stop the server: HTML to Markdown ran on the event loop, and a
 * page of 20,000 nested <div>s stalled every request for seconds, then overflowed the stack;
 * 200,000 kept /alive from answering for minutes. Now each page converts in a worker thread,
 * held to limits on its nesting, its elements and its time: the page comes back cut, the
 * observation says why, and the server answers /alive while a conversion runs.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { startLocalSite, type LocalSite } from '../support/local-site.js';

const nested = (depth: number) => `<!doctype html><html><head><title>Deep</title></head><body><p>Top of the page.</p>${'<div>'.repeat(depth)}the bottom${'</div>'.repeat(depth)}</body></html>`;
/** Within every limit but slow to convert: turndown looks at each element's whole subtree, here 500 deep over thousands of paragraphs. */
const slow = `<!doctype html><html><body>${'<div>'.repeat(500)}${'<p>word <b>bold</b></p>'.repeat(40_000)}${'</div>'.repeat(500)}</body></html>`;
const PAGES: Record<string, string> = {
  '/nested-20000': nested(20_000),
  '/nested-200000': nested(200_000),
  '/flat': `<!doctype html><html><body>${'<p>one paragraph</p>'.repeat(150_000)}<p>THE END</p></body></html>`,
  '/slow': slow,
  '/small': '<!doctype html><html><body><h1>Fine</h1><p>A small page.</p></body></html>',
};

/** Each hostile page, once sent, is followed by a request to the server's /alive; what it found is kept here by path. */
interface AliveProbe {
  /** /alive answered 200. */
  status: number;
  /** How many observations the conversation had when /alive answered. */
  observationsThen: number;
}

let site: LocalSite;
let harness: AgentHarness | undefined;
let conversationId = '';
const probes = new Map<string, Promise<AliveProbe>>();

async function observations(id: string): Promise<any[]> {
  return (await harness!.events(id)).filter((event) => event.kind === 'observation');
}

beforeAll(async () => {
  site = await startLocalSite(({ path }, res) => {
    const page = PAGES[path];
    if (page === undefined) return void res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    // Once the whole page is on its way, the server is converting it: /alive must answer meanwhile.
    res.end(page, () => {
      probes.set(
        path,
        fetch(`${harness!.server.url}/alive`).then(async (alive) => ({ status: alive.status, observationsThen: (await observations(conversationId)).length })),
      );
    });
  });
});
afterAll(async () => site?.close());
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const fetchCall = (path: string) => ({ toolCalls: [{ name: 'web_fetch', arguments: { url: `${site.url}${path}`, max_bytes: 10 * 1024 * 1024 } }] });

describe('web_fetch of a hostile page', () => {
  it('cuts deep and huge pages and says so, and the server answers /alive while each converts', { timeout: 180_000 }, async () => {
    harness = await startAgentHarness([fetchCall('/nested-20000'), fetchCall('/nested-200000'), fetchCall('/flat'), { text: 'read them' }], {
      env: { AGENTD_WEB_FETCH_ALLOW_PRIVATE: 'true', AGENTD_WEB_FETCH_HTML_MAX_ELEMENTS: '10000', AGENTD_WEB_FETCH_HTML_TIMEOUT_S: '60' },
    });
    conversationId = await harness.createConversation({ initial_message: 'read the pages' });
    await harness.waitForStatus(conversationId, ['idle'], 150_000);
    const [deep, deeper, flat] = await observations(conversationId);

    for (const page of [deep, deeper]) {
      expect(page.is_error).toBe(false);
      expect(page.content).toContain('Title: Deep');
      expect(page.content).toContain('Top of the page.');
      expect(page.content).not.toContain('the bottom');
      expect(page.content).toContain('[page cut: nesting deeper than 512; what lies deeper is left out]');
      expect(page.data).toMatchObject({ format: 'markdown', truncated: false, cut: 'nesting deeper than 512; what lies deeper is left out' });
    }
    expect(flat.content).toContain('one paragraph');
    expect(flat.content).not.toContain('THE END');
    expect(flat.content).toContain('[page cut: more than 10000 elements; the rest is left out]');
    expect(flat.content.match(/one paragraph/g).length).toBeLessThanOrEqual(10_000);

    // Each page's /alive answered before that page's observation was recorded.
    for (const [index, path] of ['/nested-20000', '/nested-200000', '/flat'].entries()) {
      expect(probes.has(path), path).toBe(true);
      expect(await probes.get(path), path).toEqual({ status: 200, observationsThen: index });
    }
    expect(harness.llm.violations).toEqual([]);
  });

  it('ends a conversion past its time: the page is not shown, the observation says why, /alive answered meanwhile', { timeout: 120_000 }, async () => {
    harness = await startAgentHarness([fetchCall('/slow'), fetchCall('/small'), { text: 'too slow' }], { env: { AGENTD_WEB_FETCH_ALLOW_PRIVATE: 'true', AGENTD_WEB_FETCH_HTML_TIMEOUT_S: '2' } });
    conversationId = await harness.createConversation({ initial_message: 'read the slow page' });
    await harness.waitForStatus(conversationId, ['idle'], 100_000);
    const [page, small] = await observations(conversationId);
    expect(page.is_error).toBe(false);
    expect(page.content).not.toContain('word **bold**');
    expect(page.content).toContain('(nothing shown)');
    expect(page.content).toContain('[page cut: converting it took longer than 2 s, so none of it is shown; a smaller max_bytes converts less]');
    expect(await probes.get('/slow')).toEqual({ status: 200, observationsThen: 0 });

    // The worker that was ended is replaced: the next page converts.
    expect(small.content).toContain('# Fine\n\nA small page.');
    expect(small.data.cut).toBeNull();
    expect(harness.llm.violations).toEqual([]);
  });
});
