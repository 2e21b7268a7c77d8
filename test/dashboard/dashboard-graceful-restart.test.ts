/**
 * The dashboard across a graceful restart (SIGTERM, as a deploy or `docker restart` does): the
 * server ends every stream with `stream_closed` (`server_shutting_down`) before it exits. The page
 * takes that for what it is, reconnects once the server is back, and shows what happens after the
 * restart without a reload; it never says the conversation was deleted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, TEST_KEY, tempDir } from '../support/agentd.js';
import { chromiumMissing, launchBrowser, type TestBrowser } from '../support/browser.js';
import { restartableServer, RESTART_TEST_TIMEOUT } from '../support/restartable-server.js';
import { connectSse } from '../support/sse-client.js';

if (chromiumMissing) process.stderr.write(`dashboard-graceful-restart.test.ts ${chromiumMissing}\n`);

const harness = restartableServer();
let browser: TestBrowser;

beforeAll(async () => {
  if (chromiumMissing) return;
  browser = await launchBrowser();
}, 60_000);
afterAll(async () => {
  await browser?.close();
});

describe.skipIf(chromiumMissing)('dashboard across a graceful restart', () => {
  it('reconnects after stream_closed (server_shutting_down) and shows the messages sent after the restart', { timeout: RESTART_TEST_TIMEOUT }, async () => {
    const llm = await harness.fakeLlm({ script: [{ text: 'before the restart' }] });
    const options = { dataDir: tempDir(), port: await freePort(), env: { AGENTD_LLM_MODEL: 'fake-model', AGENTD_LLM_BASE_URL: llm.url, AGENTD_LLM_API_KEY: 'fake-key' } };
    await harness.start(options);
    const created = await harness.api('/conversations', { method: 'POST', body: JSON.stringify({ title: 'restart gracefully', initial_message: 'hello' }) });

    const page = await browser.newPage();
    try {
      const errors: string[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      await page.goto(`${harness.server.url}/ui#/c/${created.id}/timeline`);
      await page.fill('input[name=key]', TEST_KEY);
      await page.click('button[type=submit]');
      await page.locator('.event-message.message-agent', { hasText: 'before the restart' }).waitFor({ timeout: 30_000 });
      await page.locator('[data-testid=timeline-connection][data-state=live]').waitFor();

      // A witness beside the page: the server does end its streams with the shutdown notice.
      const witness = await connectSse(`${harness.server.url}/conversations/${created.id}/events/stream?access_token=${TEST_KEY}&after_seq=1000000`);
      const stopping = harness.server;
      stopping.child.kill('SIGTERM');
      await witness.ended;
      expect(witness.messages.filter((message) => message.event === 'stream_closed').map((message) => JSON.parse(message.data))).toEqual([{ reason: 'server_shutting_down' }]);
      await stopping.exited;
      await page.locator('[data-testid=timeline-connection][data-state=reconnecting]').waitFor({ timeout: 15_000 });

      await harness.start(options);
      await page.locator('[data-testid=timeline-connection][data-state=live]').waitFor({ timeout: 30_000 });
      await page.locator('[data-testid=firehose-connection][data-state=live]').waitFor({ timeout: 30_000 });
      llm.setScript([{ text: 'after the restart' }]);
      await harness.api(`/conversations/${created.id}/messages`, { method: 'POST', body: JSON.stringify({ content: 'still there?' }) });
      await page.locator('.event-message.message-user', { hasText: 'still there?' }).waitFor({ timeout: 30_000 });
      await page.locator('.event-message.message-agent', { hasText: 'after the restart' }).waitFor({ timeout: 30_000 });

      expect(await page.getByText('This conversation was deleted.').count()).toBe(0);
      // Every event once, in order: nothing replayed twice across the two connections.
      const shown = await page.locator('[data-testid=timeline] [data-seq]').evaluateAll((cards) => cards.map((card) => Number(card.getAttribute('data-seq'))));
      expect(shown).toEqual([...shown].sort((a, b) => a - b));
      expect(new Set(shown).size).toBe(shown.length);
      expect(errors).toEqual([]);
    } catch (error) {
      await browser.screenshots('graceful-restart');
      throw error;
    } finally {
      await browser.closePages();
    }
  });
});
