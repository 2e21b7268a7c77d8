import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { startLocalSite, type LocalSite } from '../support/local-site.js';

const PAGE = `<!doctype html><html><head><title>Release notes &amp; more</title><style>body{color:red}</style><script>window.secret = "not for the model"</script></head>
<body><nav><a href="/">Home</a></nav><h1>Version 2.0</h1><p>The <strong>fast</strong> release, see <a href="https://example.com/docs">the docs</a>.</p>
<ul><li>first change</li><li>second change</li></ul><pre><code>npm install thing</code></pre><img src="data:image/png;base64,AAAA" alt="a chart"></body></html>`;

/** A small web site on 127.0.0.1: pages, JSON, redirects, a cookie, and a log of what each request carried. */
function startSite(): Promise<LocalSite> {
  return startLocalSite(({ path }, res) => {
    if (path === '/page') return void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE);
    if (path === '/data.json') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"version":"2.0","ok":true}');
    if (path === '/notes.txt') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('plain *text* stays as it is\n');
    if (path === '/big') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('x'.repeat(50_000));
    if (path === '/image.png') return void res.writeHead(200, { 'content-type': 'image/png' }).end(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2]));
    if (path === '/missing') return void res.writeHead(404, { 'content-type': 'text/plain' }).end('no such page');
    if (path === '/hop1') return void res.writeHead(302, { location: '/hop2', 'set-cookie': 'session=abc123; Path=/' }).end();
    if (path === '/hop2') return void res.writeHead(301, { location: '/page' }).end();
    if (path.startsWith('/loop')) return void res.writeHead(302, { location: `/loop${Number(path.slice(5) || 0) + 1}` }).end();
    res.writeHead(404).end();
  });
}

let site: LocalSite;
let harness: AgentHarness | undefined;
beforeAll(async () => {
  site = await startSite();
});
afterAll(async () => site?.close());
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const fetchCall = (url: string, extra: Record<string, unknown> = {}) => ({ toolCalls: [{ name: 'web_fetch', arguments: { url, ...extra } }] });

async function observations(h: AgentHarness, id: string): Promise<any[]> {
  return (await h.events(id)).filter((event) => event.kind === 'observation');
}

describe('web_fetch', () => {
  it('reads a local page as markdown, JSON and text as they are, follows redirects without credentials, caps the size', { timeout: 60_000 }, async () => {
    harness = await startAgentHarness(
      [
        fetchCall(`${site.url}/page`),
        fetchCall(`${site.url}/data.json`),
        fetchCall(`${site.url}/notes.txt`),
        fetchCall(`${site.url}/hop1`),
        fetchCall(`${site.url}/big`, { max_bytes: 1000 }),
        fetchCall(`${site.url}/image.png`),
        fetchCall(`${site.url}/missing`),
        fetchCall(`${site.url}/loop0`),
        fetchCall('file:///etc/passwd'),
        { text: 'read them all' },
      ],
      { env: { AGENTD_SANDBOX_NETWORK_HOST: 'true' } },
    );
    const id = await harness.createConversation({ sandbox: { network: 'host' }, initial_message: 'read the release notes' });
    await harness.waitForStatus(id, ['idle'], 30_000);
    const [page, json, text, redirected, big, image, missing, loop, file] = await observations(harness, id);

    expect(page.is_error).toBe(false);
    expect(page.content).toContain(`URL: ${site.url}/page (status 200, text/html; charset=utf-8`);
    expect(page.content).toContain('Title: Release notes & more');
    expect(page.content).toContain('# Version 2.0');
    expect(page.content).toContain('The **fast** release, see [the docs](https://example.com/docs).');
    expect(page.content).toMatch(/- first change\n- second change/);
    expect(page.content).not.toContain("[Home]");
    expect(page.content.match(/Release notes/g)).toHaveLength(1);
    expect(page.content).toContain('```\nnpm install thing\n```');
    expect(page.content).toContain('[image: a chart]');
    expect(page.content).not.toContain('not for the model');
    expect(page.content).not.toContain('color:red');
    expect(page.data).toMatchObject({ status: 200, format: 'markdown', truncated: false });

    expect(json.content).toContain('{"version":"2.0","ok":true}');
    expect(json.data.format).toBe('text');
    expect(text.content).toContain('plain *text* stays as it is');

    expect(redirected.content).toContain(`URL: ${site.url}/page (status 200`);
    expect(redirected.content).toContain('after 2 redirect(s)');
    expect(redirected.data).toMatchObject({ redirects: 2 });
    // No credentials of any kind, and the cookie the first hop set is not sent back.
    const hops = site.requests.filter((request) => ['/hop1', '/hop2', '/page'].includes(request.path));
    expect(hops.length).toBeGreaterThanOrEqual(4);
    for (const hop of site.requests) {
      expect(hop.headers.authorization).toBeUndefined();
      expect(hop.headers.cookie).toBeUndefined();
      expect(hop.headers['user-agent']).toMatch(/^agentd\//);
      expect(JSON.stringify(hop.headers)).not.toContain('sk-test-llm-key');
    }

    expect(big.content).toContain('1000 bytes, cut at max_bytes');
    expect(big.content).toContain('raise max_bytes');
    expect(big.data).toMatchObject({ truncated: true, bytes: 1000 });
    expect(image.content).toContain('(binary content, not shown: image/png)');
    expect(missing).toMatchObject({ is_error: true });
    expect(missing.content).toContain('status 404');
    expect(missing.content).toContain('no such page');
    expect(loop).toMatchObject({ is_error: true, data: { error: 'too_many_redirects' } });
    expect(loop.content).toContain('more than 5 redirects');
    expect(file).toMatchObject({ is_error: true, data: { error: 'invalid_url' } });
    expect(file.content).toContain('only http and https URLs can be fetched, not file:');
    expect(harness.llm.violations).toEqual([]);
  });

  it('is refused without network, and with the normal network reaches no loopback address unless the operator allows it', { timeout: 60_000 }, async () => {
    const before = site.requests.length;
    harness = await startAgentHarness([
      fetchCall(`${site.url}/page`),
      { text: 'no network' },
      fetchCall(`${site.url}/page`),
      fetchCall(`http://localhost:${new URL(site.url).port}/page`),
      fetchCall(`http://[::ffff:127.0.0.1]:${new URL(site.url).port}/page`),
      { text: 'refused' },
    ]);
    const offline = await harness.createConversation({ sandbox: { network: false }, initial_message: 'read it' });
    await harness.waitForStatus(offline, ['idle']);
    const [noNetwork] = await observations(harness, offline);
    expect(noNetwork).toMatchObject({ is_error: true, data: { error: 'no_network' } });
    expect(noNetwork.content).toContain('this conversation has no network');

    const online = await harness.createConversation({ sandbox: { network: true }, initial_message: 'read it' });
    await harness.waitForStatus(online, ['idle']);
    const refused = await observations(harness, online);
    expect(refused).toHaveLength(3);
    for (const observation of refused) {
      expect(observation).toMatchObject({ is_error: true, data: { error: 'refused' } });
      expect(observation.content).toContain('AGENTD_WEB_FETCH_ALLOW_PRIVATE');
    }
    expect(refused[0].content).toMatch(/127\.0\.0\.1 is a loopback, private, link-local or reserved address/);
    expect(site.requests.length).toBe(before);
    await harness.close();

    // The operator's switch lets sandbox.network true reach private addresses.
    harness = await startAgentHarness([fetchCall(`http://localhost:${new URL(site.url).port}/notes.txt`), { text: 'ok' }], { env: { AGENTD_WEB_FETCH_ALLOW_PRIVATE: 'true' } });
    const allowed = await harness.createConversation({ initial_message: 'read it' });
    await harness.waitForStatus(allowed, ['idle']);
    const [read] = await observations(harness, allowed);
    expect(read.is_error).toBe(false);
    expect(read.content).toContain('plain *text* stays as it is');
  });
});
