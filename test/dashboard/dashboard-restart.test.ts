/**
 * The dashboard across a server restart, in a real Chromium: kill -9 the server under an open
 * page, see the page say it is reconnecting, start the server again on the same port and data
 * dir, and see the timeline resume from where it was: every event exactly once, in seq order,
 * the new run's events included. Screenshots of a failing test go to its temp dir.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { startFakeLlm, type FakeLlm } from '../fake-llm/fake-llm-server.js';
import { freePort, spawnServer, tempDir, TEST_KEY, type SpawnedServer } from '../support/agentd.js';
import { okJson } from '../support/json-api.js';
import { chromiumMissing, launchBrowser, type TestBrowser } from '../support/browser.js';

if (chromiumMissing) process.stderr.write(`dashboard-restart.test.ts ${chromiumMissing}\n`);

let browser: TestBrowser;
let llm: FakeLlm;
let server: SpawnedServer | undefined;

beforeAll(async () => {
  if (chromiumMissing) return;
  browser = await launchBrowser();
  llm = await startFakeLlm({ script: [] });
}, 60_000);
afterEach(async (context) => {
  if (context.task.result?.state === 'fail') await browser?.screenshots(context.task.name);
  await browser?.closePages();
  server?.child.kill('SIGKILL');
  await server?.exited;
});
afterAll(async () => {
  await browser?.close();
  await llm?.close();
});

const api = (method: string, route: string, body?: unknown): Promise<any> => okJson(server!.url, method, route, body);

/**
 * The seqs of the events shown, in page order (subagent events included); a `usage` event shown
 * in the step it belongs to (the card right after it) counts just before that card.
 */
const shownSeqs = (page: Page): Promise<number[]> =>
  page.locator('[data-testid=timeline] [data-seq]').evaluateAll((cards) =>
    cards.flatMap((card) => {
      const usage = card.querySelector(':scope > .event-meta [data-usage-seq]');
      return [...(usage ? [Number(usage.getAttribute('data-usage-seq'))] : []), Number(card.getAttribute('data-seq'))];
    }),
  );

async function allSeqs(id: string): Promise<number[]> {
  return (await api('GET', `/conversations/${id}/events?limit=1000`)).items.map((event: { seq: number }) => event.seq);
}

describe.skipIf(chromiumMissing)('dashboard across a server restart', () => {
  it('shows that it is reconnecting, then resumes the timeline with no gap and no duplicate', { timeout: 120_000 }, async () => {
    const dataDir = tempDir();
    const port = await freePort();
    const env = { AGENTD_LLM_MODEL: 'fake-model', AGENTD_LLM_BASE_URL: llm.url, AGENTD_LLM_API_KEY: 'fake-key' };
    server = await spawnServer({ dataDir, port, env });
    llm.setScript([{ text: 'first', toolCalls: [{ name: 'bash', arguments: { command: 'echo one' } }] }, { text: 'first run done' }]);
    const created = await api('POST', '/conversations', { title: 'restart me', initial_message: 'go' });

    const page = await browser.newPage();
    await page.goto(`${server.url}/ui#/c/${created.id}/timeline`);
    await page.fill('input[name=key]', TEST_KEY);
    await page.click('button[type=submit]');
    await page.locator('.event-message.message-agent', { hasText: 'first run done' }).waitFor({ timeout: 30_000 });
    await page.locator('[data-testid=timeline-connection][data-state=live]').waitFor();
    await page.locator('[data-testid=firehose-connection][data-state=live]').waitFor();
    await expect.poll(async () => (await shownSeqs(page)).length, { timeout: 10_000 }).toBe((await allSeqs(created.id)).length);
    const before = await shownSeqs(page);

    server.child.kill('SIGKILL');
    await server.exited;
    await page.locator('[data-testid=timeline-connection][data-state=reconnecting]').waitFor({ timeout: 15_000 });
    await page.locator('[data-testid=firehose-connection][data-state=reconnecting]').waitFor({ timeout: 15_000 });
    expect(await page.locator('[data-testid=timeline-connection]').innerText()).toContain('reconnecting');

    server = await spawnServer({ dataDir, port, env });
    await page.locator('[data-testid=timeline-connection][data-state=live]').waitFor({ timeout: 30_000 });
    llm.setScript([{ text: 'second', toolCalls: [{ name: 'bash', arguments: { command: 'echo two' } }] }, { text: 'second run done' }]);
    await api('POST', `/conversations/${created.id}/messages`, { content: 'again' });
    await page.locator('.event-message.message-agent', { hasText: 'second run done' }).waitFor({ timeout: 30_000 });

    const expected = await allSeqs(created.id);
    await expect.poll(() => shownSeqs(page), { timeout: 10_000 }).toEqual(expected);
    expect(expected).toEqual(expected.map((_, index) => index + 1));
    expect(expected.length).toBeGreaterThan(before.length);
    expect((await shownSeqs(page)).slice(0, before.length)).toEqual(before);
    await page.locator('.event-message.message-user', { hasText: 'again' }).waitFor();
    expect(llm.violations).toEqual([]);
  });
});
