/**
 * The dashboard's Schedules tab in a real Chromium: a conversation's schedules with their rule,
 * next fire and last outcomes, and pause from the page (the real server, the fake LLM).
 */
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { TEST_KEY } from '../support/agentd.js';
import { chromiumMissing } from '../support/browser.js';
import { okJson } from '../support/json-api.js';
import { until } from '../support/reliability.js';
import { useDashboardSession } from '../support/dashboard-session.js';

const ui = useDashboardSession('dashboard-schedules.test.ts');
const api = (method: string, route: string, body?: unknown): Promise<any> => okJson(ui.server.url, method, route, body);

async function signedIn(hash: string): Promise<Page> {
  const page = await ui.browser.newPage();
  await page.goto(`${ui.server.url}/ui${hash}`);
  await page.fill('input[name=key]', TEST_KEY);
  await page.click('button[type=submit]');
  await page.waitForSelector('[data-testid=conversation-list]');
  return page;
}

describe.skipIf(chromiumMissing)('dashboard schedules', () => {
  it("lists a conversation's schedules with their next fire and last outcomes, and pauses one", { timeout: 90_000 }, async () => {
    ui.llm.setScript([{ text: 'report written' }]);
    const conversation = await api('POST', '/conversations', { title: 'with schedules' });
    const yearly = await api('POST', `/conversations/${conversation.id}/schedules`, { cron: '0 9 1 1 *', timezone: 'Europe/Berlin', message: { content: 'yearly report' } });
    const hourly = await api('POST', `/conversations/${conversation.id}/schedules`, { every: 'PT1H', message: { content: 'hourly' } });
    await api('POST', `/schedules/${hourly.id}/pause`, { note: 'on hold' });
    const fire = await api('POST', `/schedules/${yearly.id}/trigger`);
    expect(fire.outcome).toBe('started');
    await until(async () => (await api('GET', `/conversations/${conversation.id}`)).status !== 'running', 'the run to end');
    // Another conversation's schedule is not listed.
    const other = await api('POST', '/conversations', { title: 'other' });
    await api('POST', `/conversations/${other.id}/schedules`, { cron: '@daily', message: { content: 'elsewhere' } });

    const page = await signedIn(`#/c/${conversation.id}/schedules`);
    await page.waitForSelector('[data-testid=schedules] [data-testid=schedule]');
    const cards = page.locator('[data-testid=schedule]');
    expect(await cards.count()).toBe(2);
    const yearlyCard = page.locator(`[data-testid=schedule][data-id="${yearly.id}"]`);
    expect(await yearlyCard.locator('code').textContent()).toBe('0 9 1 1 *');
    expect(await yearlyCard.locator('[data-testid=schedule-status]').textContent()).toBe('active');
    const next = await page.evaluate((iso) => new Date(iso).toLocaleString(), yearly.next_fire_at as string);
    expect(await yearlyCard.locator('[data-testid=next-fire]').textContent()).toBe(`next: ${next}`);
    await yearlyCard.locator('[data-testid=fires] li[data-outcome=started]').waitFor();
    expect(await yearlyCard.locator('[data-testid=fires] li').first().textContent()).toContain('(manual)');

    const hourlyCard = page.locator(`[data-testid=schedule][data-id="${hourly.id}"]`);
    expect(await hourlyCard.locator('[data-testid=schedule-status]').textContent()).toBe('paused');
    expect(await hourlyCard.textContent()).toContain('on hold');
    expect(await hourlyCard.textContent()).toContain('Not fired yet.');

    await yearlyCard.getByRole('button', { name: 'pause' }).click();
    await until(async () => (await yearlyCard.locator('[data-testid=schedule-status]').textContent()) === 'paused', 'the page to show the pause');
    expect((await api('GET', `/schedules/${yearly.id}`)).status).toBe('paused');
  });
});
