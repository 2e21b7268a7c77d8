/**
 * What a first use of the dashboard ran into (issue 79), each in a real Chromium against the real
 * server and the scripted fake LLM: the Upload button, a masked secret in the agent's text, the
 * usage of each LLM call, the connection badge beside the events' timestamps, a 420 px wide
 * window, and conversations created without a title (as the CLI creates them).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Locator, Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { TEST_KEY } from '../support/agentd.js';
import { okJson } from '../support/json-api.js';
import { chromiumMissing } from '../support/browser.js';
import { useDashboardSession } from '../support/dashboard-session.js';

const ui = useDashboardSession('dashboard-first-use.test.ts');

interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

/** A tab signed in to the dashboard, its uncaught errors collected in `errors`. */
async function signedIn(hash = '', viewport?: { width: number; height: number }): Promise<{ page: Page; errors: string[] }> {
  const page = await ui.browser.newPage();
  if (viewport) await page.setViewportSize(viewport);
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  await page.goto(`${ui.server.url}/ui${hash}`);
  await page.fill('input[name=key]', TEST_KEY);
  await page.click('button[type=submit]');
  await page.waitForSelector(hash ? '[data-testid=conversation]' : '[data-testid=conversation-list]');
  return { page, errors };
}

const api = (method: string, route: string, body?: unknown): Promise<any> => okJson(ui.server.url, method, route, body);

async function box(locator: Locator): Promise<Box> {
  const found = await locator.boundingBox();
  if (!found) throw new Error(`not displayed: ${String(locator)}`);
  return found;
}

function overlaps(a: Box, b: Box): boolean {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}

/** A conversation with `count` user messages and no run: a timeline long enough to scroll. */
async function longConversation(count: number): Promise<string> {
  const created = await api('POST', '/conversations', { title: `long ${Date.now()}` });
  for (let index = 1; index <= count; index += 1) await api('POST', `/conversations/${created.id}/messages`, { content: `message ${index}`, run: false });
  return created.id;
}

describe.skipIf(chromiumMissing)('dashboard first use', () => {
  it('uploads through the Upload button, twice, without an error', { timeout: 60_000 }, async () => {
    const created = await api('POST', '/conversations', { title: 'upload button' });
    const { page, errors } = await signedIn(`#/c/${created.id}/files`);
    for (const content of ['first version\n', 'second version\n']) {
      const [chooser] = await Promise.all([page.waitForEvent('filechooser'), page.getByRole('button', { name: 'Upload…' }).click()]);
      await chooser.setFiles({ name: 'picked.txt', mimeType: 'text/plain', buffer: Buffer.from(content) });
      await page.locator('.notice', { hasText: 'Uploaded picked.txt' }).waitFor();
      await expect.poll(() => fs.readFileSync(path.join(created.workdir, 'picked.txt'), 'utf8')).toBe(content);
      // The picker is emptied after each upload, so choosing the same file again uploads it again.
      await expect.poll(() => page.locator('[data-testid=upload-input]').inputValue()).toBe('');
    }
    await page.locator('tr[data-path="picked.txt"]').waitFor();
    expect(errors).toEqual([]);
  });

  it('shows a masked secret in the agent text as a token, never as a link', { timeout: 60_000 }, async () => {
    const value = `tok-${Date.now()}-9c1e`;
    ui.llm.setScript([{ text: `Deployed with ${value}; see <secret:OTHER_TOKEN> and https://example.org/docs too.` }]);
    const created = await api('POST', '/conversations', { title: 'secret in text', secrets: { DEPLOY_TOKEN: value }, initial_message: 'deploy' });
    const { page } = await signedIn(`#/c/${created.id}/timeline`);
    const answer = page.locator('.event-message.message-agent[data-seq] .markdown');
    await answer.waitFor({ timeout: 30_000 });
    expect(await answer.locator('.secret-mask').allInnerTexts()).toEqual(['<secret:DEPLOY_TOKEN>', '<secret:OTHER_TOKEN>']);
    // Only the real URL is a link.
    expect(await answer.locator('a').evaluateAll((links) => links.map((link) => link.getAttribute('href')))).toEqual(['https://example.org/docs']);
    expect(await page.content()).not.toContain(value);
  });

  it('folds each usage into the step its LLM call wrote, with no usage line of its own', { timeout: 60_000 }, async () => {
    ui.llm.setScript([{ text: 'Looking.', toolCalls: [{ name: 'bash', arguments: { command: 'echo folded' } }] }, { text: 'All done.' }]);
    const created = await api('POST', '/conversations', { title: 'usage folded', initial_message: 'go' });
    const { page } = await signedIn(`#/c/${created.id}/timeline`);
    const timeline = page.locator('[data-testid=timeline]');
    await timeline.locator('.event-message.message-agent', { hasText: 'All done.' }).waitFor({ timeout: 30_000 });
    await page.locator('.conversation-head [data-testid=status]', { hasText: /^(idle|finished)$/ }).waitFor({ timeout: 30_000 });

    const usages = (await api('GET', `/conversations/${created.id}/events?kind=usage`)).items as { seq: number; prompt_tokens: number; completion_tokens: number }[];
    expect(usages).toHaveLength(2);
    await expect.poll(() => timeline.locator('[data-usage-seq]').count()).toBe(2);
    expect(await timeline.locator('.event-usage').count()).toBe(0);
    // Each in the card of the step right after it: the bash call, then the answer.
    const action = timeline.locator('.event-action');
    const message = timeline.locator('.event-message.message-agent[data-seq]');
    expect(await action.locator('[data-usage-seq]').getAttribute('data-usage-seq')).toBe(String(usages[0]!.seq));
    expect(await message.locator('[data-usage-seq]').getAttribute('data-usage-seq')).toBe(String(usages[1]!.seq));
    expect(await action.getAttribute('data-seq')).toBe(String(usages[0]!.seq + 1));
    expect(await action.locator('.event-meta').innerText()).toContain(`↑${usages[0]!.prompt_tokens} ↓${usages[0]!.completion_tokens}`);
  });

  it('keeps the connection badge off the events\' timestamps wherever the timeline is scrolled', { timeout: 90_000 }, async () => {
    const id = await longConversation(30);
    const { page } = await signedIn(`#/c/${id}/timeline`);
    const badge = page.locator('[data-testid=timeline-connection]');
    await page.locator('[data-testid=timeline-connection][data-state=live]').waitFor();
    const metas = page.locator('[data-testid=timeline] .event-meta');
    await expect.poll(() => metas.count()).toBe(30);
    for (const index of [0, 7, 15, 22]) {
      // The card at the top of the timeline's visible area, where the badge used to sit over it.
      await page.locator('[data-testid=timeline] .event').nth(index).evaluate((card) => card.scrollIntoView({ block: 'start' }));
      const badgeBox = await box(badge);
      for (let shown = index; shown < index + 4; shown += 1) expect(overlaps(badgeBox, await box(metas.nth(shown))), `badge over the timestamp of card ${shown}`).toBe(false);
    }
  });

  it('is usable 420 px wide: the list and a conversation in turn, nothing overlapping or cut off', { timeout: 90_000 }, async () => {
    const id = await longConversation(12);
    const width = 420;
    const { page, errors } = await signedIn(`#/c/${id}/timeline`, { width, height: 800 });
    await page.locator('[data-testid=timeline] .event').nth(11).waitFor();
    const parts = {
      title: page.locator('.conversation-head h2'),
      status: page.locator('.conversation-head [data-testid=status]'),
      controls: page.locator('.controls'),
      tabs: page.locator('nav.tabs'),
      timeline: page.locator('[data-testid=timeline]'),
      composer: page.locator('.composer textarea'),
      send: page.locator('.composer button[type=submit]'),
    };
    const boxes = Object.fromEntries(await Promise.all(Object.entries(parts).map(async ([name, locator]) => [name, await box(locator)] as const))) as Record<keyof typeof parts, Box>;
    for (const [name, found] of Object.entries(boxes)) {
      expect(found.x, `${name} starts inside the window`).toBeGreaterThanOrEqual(0);
      expect(found.x + found.width, `${name} ends inside the window`).toBeLessThanOrEqual(width);
    }
    const blocks = ['controls', 'tabs', 'timeline', 'composer'] as const;
    for (const [index, a] of blocks.entries()) for (const b of blocks.slice(index + 1)) expect(overlaps(boxes[a], boxes[b]), `${a} and ${b} overlap`).toBe(false);
    expect(overlaps(boxes.title, boxes.status)).toBe(false);
    expect(overlaps(boxes.composer, boxes.send)).toBe(false);
    // The conversation has the width: the timeline and the message box are not squeezed beside the list.
    expect(boxes.timeline.width).toBeGreaterThan(width - 40);
    expect(boxes.timeline.height).toBeGreaterThan(300);
    expect(boxes.composer.width).toBeGreaterThan(200);
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(width);

    // The message box works at this size.
    await page.fill('.composer textarea', 'typed on a phone');
    await page.locator('.composer button[type=submit]').click();
    await page.locator('[data-testid=timeline] .event-message.message-user', { hasText: 'typed on a phone' }).waitFor();

    // Back to the list, which then has the width, and into the conversation again.
    await page.locator('[data-testid=back]').click();
    const entry = page.locator(`[data-testid=conversation-list] li[data-id="${id}"]`);
    await entry.waitFor();
    expect((await box(page.locator('[data-testid=conversation-list]'))).width).toBeGreaterThan(width - 60);
    expect((await box(page.locator('button.new'))).x + (await box(page.locator('button.new'))).width).toBeLessThanOrEqual(width);
    await entry.click();
    await page.locator(`[data-testid=conversation][data-id="${id}"]`).waitFor();
    expect(await page.locator('[data-testid=conversation-list]').isVisible()).toBe(false);
    expect(errors).toEqual([]);
  });

  it('lists a conversation created without a title by its first message, as the CLI creates them', { timeout: 60_000 }, async () => {
    const { page } = await signedIn();
    await page.waitForSelector('[data-testid=firehose-connection][data-state=live]');
    // What `agentd run` does: create with no title, then send the prompt.
    const created = await api('POST', '/conversations', {});
    await api('POST', `/conversations/${created.id}/messages`, { content: `Rename the build step ${created.id.slice(0, 8)}\nand more lines`, run: false });
    const entry = page.locator(`[data-testid=conversation-list] li[data-id="${created.id}"] .title`);
    await expect.poll(() => entry.innerText(), { timeout: 20_000 }).toBe(`Rename the build step ${created.id.slice(0, 8)}`);
    await entry.click();
    expect(await page.locator('.conversation-head h2').innerText()).toBe(`Rename the build step ${created.id.slice(0, 8)}`);
  });
});
