/**
 * The dashboard shows what condensation and double-texting did, from a real conversation: the
 * condensation card names the summarized range, the token estimate and why, and opens to the
 * summary; rollback and interrupt cards say what happened to the run.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FakeTurn } from '../fake-llm/fake-llm-server.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { TEST_KEY } from '../support/agentd.js';
import { chromiumMissing, launchBrowser, type TestBrowser } from '../support/browser.js';

if (chromiumMissing) process.stderr.write(`dashboard-condensation.test.ts ${chromiumMissing}\n`);

let browser: TestBrowser;
let harness: AgentHarness;

const bash = (command: string): FakeTurn => ({ toolCalls: [{ name: 'bash', arguments: { command } }] });

beforeAll(async () => {
  if (chromiumMissing) return;
  browser = await launchBrowser();
  harness = await startAgentHarness([bash('echo one'), bash('echo two'), bash('echo three'), { text: 'counted' }, { hang: true }, { text: 'fresh start' }], { fake: { summarizer: true } });
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await harness?.close();
});

async function until(check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe.skipIf(chromiumMissing)('dashboard: condensation, interrupt and rollback events', () => {
  it('renders each event sensibly', { timeout: 60_000 }, async () => {
    const id = await harness.createConversation({ condenser: { keep_last: 2 }, initial_message: 'count' });
    await harness.waitForStatus(id, ['idle']);
    expect((await harness.post(`/conversations/${id}/condense`)).status).toBe(202);
    await until(async () => (await harness.events(id)).some((event) => event.kind === 'condensation'));
    const asked = harness.llm.requests.length;
    await harness.post(`/conversations/${id}/messages`, { content: 'wait for me' });
    await harness.waitForStatus(id, ['running']);
    // The rollback comes once the LLM is answering (hanging): the run's checkpoint may delay its request.
    await until(async () => harness.llm.requests.length > asked);
    expect((await harness.post(`/conversations/${id}/messages`, { content: 'start over', multitask_strategy: 'rollback' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    const events = await harness.events(id);
    const condensation = events.find((event) => event.kind === 'condensation');
    const rollback = events.find((event) => event.kind === 'rollback');

    const page = await browser.newPage();
    await page.goto(`${harness.server.url}/ui#/c/${id}/timeline`);
    await page.fill('input[name=key]', TEST_KEY);
    await page.click('button[type=submit]');
    const card = page.locator(`[data-testid=timeline] [data-seq="${condensation.seq}"]`);
    await card.waitFor();
    expect(await card.locator('summary').innerText()).toBe(
      `Context condensed: events #${condensation.forgotten_from_seq}–#${condensation.forgotten_to_seq} summarized · ~${condensation.tokens_before} → ~${condensation.tokens_after} tokens · asked for`,
    );
    await card.locator('summary').click();
    expect(await card.locator('.markdown').innerText()).toContain('SUMMARY of events');
    const rolled = page.locator(`[data-testid=timeline] [data-seq="${rollback.seq}"]`);
    expect(await rolled.innerText()).toContain(`Run rolled back: events #${rollback.forgotten_from_seq}–#${rollback.forgotten_to_seq} no longer reach the model`);
    expect(await page.locator(`[data-testid=timeline] [data-seq="${rollback.seq + 1}"] .who`).innerText()).toBe('You · sent during a run (rollback)');
  });
});
