/**
 * The dashboard with a real subagent run, end to end in Chromium: the real server, the scripted
 * fake LLM answering the main agent and the subagent apart (a route keyed on the task's marker),
 * real bash in the subagent. Its events arrive over SSE while the page is open and must sit under
 * their task call, tagged with the agent's name, and not twice at top level.
 */
import { describe, expect, it } from 'vitest';
import { TEST_KEY } from '../support/agentd.js';
import { okJson } from '../support/json-api.js';
import { chromiumMissing } from '../support/browser.js';
import { useDashboardSession } from '../support/dashboard-session.js';

const ui = useDashboardSession('dashboard-subagents.test.ts');

const api = (method: string, route: string, body?: unknown): Promise<any> => okJson(ui.server.url, method, route, body);

describe.skipIf(chromiumMissing)('dashboard with a real subagent run', () => {
  it('streams the subagent in nested under its task call, tagged with its name', { timeout: 90_000 }, async () => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    ui.llm.setScript([{ text: 'Delegating.', toolCalls: [{ id: 'call_explore', name: 'task', arguments: { description: 'Explore files', prompt: 'UI-SUBAGENT-JOB: list the files' } }] }, { text: 'The explorer is done.' }]);
    // The subagent waits for the page to be open, so everything it does arrives live over SSE.
    ui.llm.route({ when: 'UI-SUBAGENT-JOB', script: [async () => (await released, { toolCalls: [{ name: 'bash', arguments: { command: 'echo sub-$((40+2))' } }] }), { text: 'Subagent found 42.', chunkDelayMs: 30 }] });
    const created = await api('POST', '/conversations', { title: 'subagent run', initial_message: 'explore please' });
    const page = await ui.browser.newPage();
    await page.goto(`${ui.server.url}/ui#/c/${created.id}/timeline`);
    await page.fill('input[name=key]', TEST_KEY);
    await page.click('button[type=submit]');
    const timeline = page.locator('[data-testid=timeline]');
    const task = timeline.locator('.events > .event-action', { hasText: 'Explore files' });
    await task.waitFor();
    release();

    await page.locator('.conversation-head [data-testid=status]', { hasText: 'idle' }).waitFor({ timeout: 30_000 });
    const events = (await api('GET', `/conversations/${created.id}/events?limit=1000`)).items as any[];
    const child = events.filter((event) => event.parent_tool_call_id === 'call_explore');
    expect(child.length).toBeGreaterThan(3);
    // Every subagent event that the dashboard shows is inside the task call, none at top level.
    const nested = await task.locator('.nested [data-seq]').evaluateAll((cards) => cards.map((card) => Number(card.getAttribute('data-seq'))));
    const top = await timeline.locator('.events > [data-seq]').evaluateAll((cards) => cards.map((card) => Number(card.getAttribute('data-seq'))));
    expect(nested.length).toBeGreaterThan(0);
    for (const seq of nested) expect(child.map((event) => event.seq)).toContain(seq);
    for (const seq of top) expect(child.map((event) => event.seq)).not.toContain(seq);
    const bash = child.find((event) => event.kind === 'action' && event.tool_name === 'bash');
    const card = task.locator(`.nested [data-seq="${bash.seq}"]`);
    expect(await card.locator('pre.command').innerText()).toBe('$ echo sub-$((40+2))');
    expect(await card.locator('.event-meta').innerText()).toContain('general-purpose');
    expect(await task.locator('.nested').innerText()).toContain('Subagent found 42.');
    // The main agent's answer is at top level, and the subagent's words were never streamed as the main agent's.
    expect(await timeline.locator('.events > .event-message', { hasText: 'The explorer is done.' }).count()).toBe(1);
    expect(await timeline.locator('[data-testid=streaming]').count()).toBe(0);
  });
});
