/**
 * The dashboard signed in with an owner's API key, in a real Chromium: it lists that owner's
 * conversations only (at first and as the firehose brings new ones), another owner's
 * conversation is not found, and a key lacking a scope is told which, by name, rather than
 * getting a broken page.
 */
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { TEST_KEY } from '../support/agentd.js';
import { chromiumMissing } from '../support/browser.js';
import { useDashboardSession } from '../support/dashboard-session.js';
import { client, USER_SCOPES } from '../support/access-matrix.js';

const ui = useDashboardSession('dashboard-keys.test.ts');

async function makeKey(owner: string, scopes: string[]): Promise<string> {
  const created = await client(ui.server.url, TEST_KEY)('POST', '/keys', { name: owner, owner, scopes });
  expect(created.status).toBe(201);
  return created.body.secret;
}

/** With a first message and no run: its event is what the page's firehose sees. */
async function create(secret: string, title: string): Promise<string> {
  const created = await client(ui.server.url, secret)('POST', '/conversations', { title, initial_message: `words of ${title}`, run: false });
  expect(created.status).toBe(201);
  return created.body.id;
}

async function signIn(secret: string, hash = ''): Promise<Page> {
  const page = await ui.browser.newPage();
  await page.goto(`${ui.server.url}/ui${hash}`);
  await page.fill('input[name=key]', secret);
  await page.click('button[type=submit]');
  return page;
}

const titles = (page: Page) => page.locator('[data-testid=conversation-list] li .title').allTextContents();

describe.skipIf(chromiumMissing)('dashboard with an owner key', () => {
  it("shows an owner's key only that owner's conversations, at first and live", { timeout: 90_000 }, async () => {
    const olga = await makeKey('olga', USER_SCOPES);
    const pete = await makeKey('pete', USER_SCOPES);
    await create(olga, 'olga-first');
    const petes = await create(pete, 'pete-first');
    await create(TEST_KEY, 'admin-own');

    const page = await signIn(olga);
    await page.waitForSelector('[data-testid=firehose-connection][data-state=live]');
    await page.locator('[data-testid=conversation-list] li', { hasText: 'olga-first' }).waitFor();
    expect(await titles(page)).toEqual(['olga-first']);

    // Made while the page is open: Pete's first, then Olga's; once Olga's is listed, Pete's event has passed the page's firehose.
    await create(pete, 'pete-later');
    await create(olga, 'olga-later');
    await page.locator('[data-testid=conversation-list] li', { hasText: 'olga-later' }).waitFor();
    expect((await titles(page)).sort()).toEqual(['olga-first', 'olga-later']);

    // Another owner's conversation, asked for by its address: not found, and nothing of it shown.
    await page.goto(`${ui.server.url}/ui#/c/${petes}/timeline`);
    const missing = page.locator('.error-box');
    await missing.waitFor();
    expect(await missing.textContent()).toBe(`No conversation with id ${petes}.`);
    expect(await page.locator('body').textContent()).not.toContain('pete-first');
    expect((await titles(page)).sort()).toEqual(['olga-first', 'olga-later']);
  });

  it('tells a key without conversations:read which scope it lacks, and signs nothing in', { timeout: 60_000 }, async () => {
    const writeOnly = await makeKey('olga', ['conversations:write']);
    const page = await signIn(writeOnly);
    const message = page.locator('[data-testid=sign-in] .error-text');
    await message.waitFor();
    expect(await message.textContent()).toBe('This key lacks the scope conversations:read, which the dashboard needs to list conversations. Sign in with a key that has it.');
    expect(await page.locator('[data-testid=conversation-list]').count()).toBe(0);
    expect(await page.evaluate("sessionStorage.getItem('agentd.key')")).toBeNull();
  });

  it("shows a read-only key its owner's list and says which scope an action needs", { timeout: 60_000 }, async () => {
    const readOnly = await makeKey('quinn', ['conversations:read']);
    const writer = await makeKey('quinn', USER_SCOPES);
    await create(writer, 'quinn-only');
    const page = await signIn(readOnly);
    await page.locator('[data-testid=conversation-list] li', { hasText: 'quinn-only' }).waitFor();
    expect(await titles(page)).toEqual(['quinn-only']);
    await page.click('button.new');
    await page.fill('[data-testid=create-form] input[name=title]', 'not allowed');
    await page.click('[data-testid=create-form] button[type=submit]');
    const refused = page.locator('[data-testid=create-form] .error-text');
    await refused.waitFor();
    expect(await refused.textContent()).toBe('This key lacks the scope conversations:write.');
    // The page is still whole: the list, the form and the session.
    expect(await titles(page)).toEqual(['quinn-only']);
    expect(await page.evaluate("sessionStorage.getItem('agentd.key')")).toBe(readOnly);
  });
});
