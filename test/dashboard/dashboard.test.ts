/**
 * The dashboard at /ui, end to end in a real Chromium (playwright-core, Debian's chromium): the
 * real server on a port, the scripted fake LLM, real bash. A failing test leaves screenshots in
 * its temp dir and prints their paths.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import type { FakeTurn } from '../fake-llm/fake-llm-server.js';
import { tempDir, TEST_KEY } from '../support/agentd.js';
import { okJson } from '../support/json-api.js';
import { chromiumMissing } from '../support/browser.js';
import { useDashboardSession } from '../support/dashboard-session.js';

const ui = useDashboardSession('dashboard.test.ts');

/** A tab signed in to the dashboard (a failing test saves screenshots of its tabs: afterEach). */
async function signedIn(hash = ''): Promise<Page> {
  const page = await ui.browser.newPage();
  await page.goto(`${ui.server.url}/ui${hash}`);
  await page.fill('input[name=key]', TEST_KEY);
  await page.click('button[type=submit]');
  await page.waitForSelector('[data-testid=conversation-list]');
  return page;
}

const api = (method: string, route: string, body?: unknown): Promise<any> => okJson(ui.server.url, method, route, body);

async function openConversation(script: FakeTurn[], body: Record<string, unknown>): Promise<{ page: Page; id: string }> {
  ui.llm.setScript(script);
  const created = await api('POST', '/conversations', body);
  const page = await signedIn(`#/c/${created.id}/timeline`);
  await page.waitForSelector(`[data-testid=conversation][data-id="${created.id}"]`);
  return { page, id: created.id };
}

const status = (page: Page) => page.locator('.conversation-head [data-testid=status]');

describe.skipIf(chromiumMissing)('dashboard in Chromium', () => {
  it('asks for the key first, then creates a conversation and streams its run in, markdown rendered safely', { timeout: 90_000 }, async () => {
    const title = `demo ${Date.now()}`;
    ui.llm.setScript([
      { text: 'Let me look.', toolCalls: [{ name: 'bash', arguments: { command: 'echo hello-from-bash' } }] },
      {
        text: 'All **done**: the shell said `hello-from-bash`.\n\n<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script> [x](javascript:window.__pwned=3)',
        chunkDelayMs: 60,
      },
    ]);
    const page = await ui.browser.newPage();
    await page.goto(`${ui.server.url}/ui`);
    // Nothing but the sign-in form before a key: the page holds no data.
    await page.waitForSelector('[data-testid=sign-in]');
    expect(await page.locator('[data-testid=conversation-list]').count()).toBe(0);
    await page.fill('input[name=key]', 'not-the-key');
    await page.click('button[type=submit]');
    await page.getByText('That key is not valid.').waitFor();
    await page.fill('input[name=key]', TEST_KEY);
    await page.click('button[type=submit]');
    await page.waitForSelector('[data-testid=firehose-connection][data-state=live]');
    expect(await page.evaluate("sessionStorage.getItem('agentd.key')")).toBe(TEST_KEY);

    await page.click('button.new');
    await page.fill('[data-testid=create-form] input[name=title]', title);
    const workdir = tempDir('agentd-ui-workdir-');
    await page.fill('[data-testid=create-form] input[name=workdir]', workdir);
    await page.fill('[data-testid=create-form] input[name=model]', 'picked-model');
    await page.fill('[data-testid=create-form] input[name=base_url]', ui.llm.url);
    await page.fill('[data-testid=create-form] input[name=api_key]', 'picked-key');
    await page.fill('[data-testid=create-form] textarea[name=message]', 'say hello from bash');
    await page.click('[data-testid=create-form] button[type=submit]');
    await page.waitForSelector('[data-testid=conversation]');
    const id = await page.locator('[data-testid=conversation]').getAttribute('data-id');
    const created = await api('GET', `/conversations/${id}`);
    expect(created).toMatchObject({ title, workdir: fs.realpathSync(workdir), llm: { model: 'picked-model', base_url: ui.llm.url, api_key: '**********' } });

    // The agent's answer streams in as message_delta before its message event lands.
    const streaming = page.locator('[data-testid=streaming]');
    await streaming.waitFor({ timeout: 30_000 });
    const partial = await streaming.innerText();
    expect(partial).toContain('Agent (typing…)');
    await status(page).filter({ hasText: /^(idle|finished)$/ }).waitFor({ timeout: 30_000 });
    await expect.poll(() => streaming.count()).toBe(0);

    const timeline = page.locator('[data-testid=timeline]');
    await expect.poll(() => timeline.locator('.event-message.message-user').innerText()).toContain('say hello from bash');
    expect(await timeline.locator('.event-action pre.command').innerText()).toBe('$ echo hello-from-bash');
    const observation = timeline.locator('.event-observation').first();
    expect(await observation.locator('summary').innerText()).toMatch(/bash output · exit 0 · \//);
    expect(await observation.locator('pre.output').isVisible()).toBe(false);
    await observation.locator('summary').click();
    expect(await observation.locator('pre.output').innerText()).toContain('hello-from-bash');
    const answer = timeline.locator('.event-message.message-agent .markdown').last();
    expect(await answer.locator('strong').innerText()).toBe('done');
    expect(await answer.locator('img, script').count()).toBe(0);
    expect(await answer.innerText()).toContain('<img src=x');
    expect(await answer.locator('a[href^="javascript:"]').count()).toBe(0);
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    // Usage and the list entry, updated over the firehose.
    expect(await page.locator('.conversation-head [data-testid=usage]').innerText()).toMatch(/↑[1-9][\d,]* ↓[1-9]/);
    const entry = page.locator('[data-testid=conversation-list] li', { hasText: title });
    await entry.locator('[data-testid=status]', { hasText: /^(idle|finished)$/ }).waitFor();
    const settled = (await entry.locator('[data-testid=status]').innerText()).replace(/ /g, '_');

    // Search by title and filter by status, in the list.
    await page.fill('[data-testid=search]', 'no-such-title');
    await expect.poll(() => entry.count()).toBe(0);
    await page.fill('[data-testid=search]', title.slice(0, 8));
    await expect.poll(() => entry.count()).toBe(1);
    await page.selectOption('[data-testid=status-filter]', 'running');
    await expect.poll(() => entry.count()).toBe(0);
    await page.selectOption('[data-testid=status-filter]', settled);
    await expect.poll(() => entry.count()).toBe(1);
    expect(ui.llm.violations).toEqual([]);
    expect(ui.llm.requests.at(-1)!.body.model).toBe('picked-model');
  });

  it('a conversation made elsewhere appears in the open list and follows its status live', { timeout: 60_000 }, async () => {
    const page = await signedIn();
    await page.waitForSelector('[data-testid=firehose-connection][data-state=live]');
    ui.llm.setScript([{ hang: true }]);
    const title = `from curl ${Date.now()}`;
    const created = await api('POST', '/conversations', { title, initial_message: 'hang on' });
    const entry = page.locator(`[data-testid=conversation-list] li[data-id="${created.id}"]`);
    await entry.locator('[data-testid=status]', { hasText: 'running' }).waitFor({ timeout: 20_000 });
    await api('POST', `/conversations/${created.id}/pause`);
    await entry.locator('[data-testid=status]', { hasText: 'paused' }).waitFor({ timeout: 20_000 });
  });

  it('folds the reasoning in a collapsed <details>, and never shows its provider_data', { timeout: 60_000 }, async () => {
    const delta = (fields: Record<string, unknown>, finish: string | null = null) => ({ id: 'gen-r', choices: [{ index: 0, delta: fields, finish_reason: finish }] });
    const { page, id } = await openConversation(
      [
        {
          chunks: [
            delta({ role: 'assistant', content: '', reasoning_content: 'Weighing the two files first.', reasoning_details: [{ type: 'reasoning.text', text: '', signature: 'sig-never-shown', index: 0 }] }),
            delta({ content: 'Both files agree.' }),
            delta({}, 'stop'),
          ],
        },
      ],
      {},
    );
    // Sent once the page is open: the reasoning card arrives live, over SSE.
    await api('POST', `/conversations/${id}/messages`, { content: 'compare them' });
    const card = page.locator('[data-testid=timeline] .event-reasoning');
    await card.waitFor({ timeout: 30_000 });
    await page.locator('.message-agent', { hasText: 'Both files agree.' }).waitFor();
    expect(await card.locator('details').getAttribute('open')).toBeNull();
    expect(await card.locator('summary').innerText()).toContain('Reasoning');
    await card.locator('summary').click();
    expect(await card.locator('pre').innerText()).toBe('Weighing the two files first.');
    expect(await page.locator('[data-testid=timeline]').innerText()).not.toContain('sig-never-shown');
  });

  it('approves a pending action from the page; the run continues', { timeout: 60_000 }, async () => {
    const { page, id } = await openConversation(
      [{ toolCalls: [{ name: 'bash', arguments: { command: 'echo approved-by-click > approved.txt' } }] }, { text: 'wrote it' }],
      { confirmation_mode: true, initial_message: 'write the file' },
    );
    const pending = page.locator('[data-testid=pending-actions]');
    await pending.waitFor({ timeout: 30_000 });
    expect(await pending.innerText()).toContain('echo approved-by-click');
    await status(page).filter({ hasText: 'waiting for confirmation' }).waitFor();
    await pending.getByRole('button', { name: 'Approve' }).click();
    await status(page).filter({ hasText: /^(idle|finished)$/ }).waitFor({ timeout: 30_000 });
    expect(await pending.count()).toBe(0);
    const conversation = await api('GET', `/conversations/${id}`);
    expect(fs.readFileSync(path.join(conversation.workdir, 'approved.txt'), 'utf8')).toBe('approved-by-click\n');
    await page.locator('.event-observation summary', { hasText: 'exit 0' }).waitFor();
  });

  it('answers an ask_user question from the page (POST /answer); the run continues with the answer', { timeout: 60_000 }, async () => {
    const { page, id } = await openConversation(
      [{ toolCalls: [{ id: 'call_page_q', name: 'ask_user', arguments: { question: 'Which **colour**?', options: ['red', 'blue'] } }] }, { text: 'blue it is' }],
      { initial_message: 'pick a colour' },
    );
    const question = page.locator('[data-testid=question]');
    await question.waitFor({ timeout: 30_000 });
    await status(page).filter({ hasText: 'waiting for input' }).waitFor();
    expect(await question.innerText()).toContain('Which **colour**?');
    await question.getByRole('button', { name: 'blue' }).click();
    await status(page).filter({ hasText: /^idle$/ }).waitFor({ timeout: 30_000 });
    expect(await question.count()).toBe(0);
    const events = (await api('GET', `/conversations/${id}/events?limit=1000`)).items;
    expect(events.find((event: any) => event.kind === 'observation')).toMatchObject({ tool_call_id: 'call_page_q', content: 'blue', data: { answered_via: 'answer' } });
    expect(ui.llm.requests.at(-1)!.body.messages!.find((message) => message.role === 'tool')).toMatchObject({ tool_call_id: 'call_page_q', content: 'blue' });
    await page.locator('[data-testid=timeline]', { hasText: 'blue it is' }).waitFor();
  });

  it('shows a real PreToolUse hook blocking a command, with its reason, and the block the LLM saw', { timeout: 60_000 }, async () => {
    const hooks = { PreToolUse: [{ matcher: 'bash', hooks: [{ type: 'command', command: 'echo "no listing today" >&2; exit 2' }] }] };
    const { page, id } = await openConversation([{ toolCalls: [{ name: 'bash', arguments: { command: 'ls -la' } }] }, { text: 'blocked, stopping' }], { hooks, initial_message: 'list the files' });
    await status(page).filter({ hasText: /^(idle|finished)$/ }).waitFor({ timeout: 30_000 });
    const hook = page.locator('[data-testid=timeline] .event-hook');
    await hook.first().waitFor();
    expect(await hook.first().innerText()).toMatch(/hook PreToolUse \[bash\] echo "no listing today" >&2; exit 2 → block · \d+ ms · no listing today/);
    expect(await hook.first().getAttribute('class')).toContain('is-error');
    // What the page shows is what the server recorded.
    const events = await api('GET', `/conversations/${id}/events?kind=hook`);
    expect(events.items).toEqual([expect.objectContaining({ hook_point: 'PreToolUse', decision: 'block', reason: 'no listing today' })]);
    const toolMessages = ui.llm.requests.at(-1)!.body.messages?.filter((message) => message.role === 'tool');
    expect(JSON.stringify(toolMessages)).toContain('no listing today');
  });

  it('rejects a pending action with a reason: the rejection shows in the timeline', { timeout: 60_000 }, async () => {
    const { page } = await openConversation(
      [{ toolCalls: [{ name: 'bash', arguments: { command: 'echo never > never.txt' } }] }, { text: 'fine, I will not' }],
      { confirmation_mode: true, initial_message: 'try something' },
    );
    const pending = page.locator('[data-testid=pending-actions]');
    await pending.waitFor({ timeout: 30_000 });
    await pending.locator('input').fill('not today');
    await pending.getByRole('button', { name: 'Reject' }).click();
    await page.locator('.event-rejection', { hasText: 'not today' }).waitFor({ timeout: 30_000 });
    await status(page).filter({ hasText: /^(idle|finished)$/ }).waitFor({ timeout: 30_000 });
  });

  it('pauses a long command from the page, runs again and cancels that run', { timeout: 60_000 }, async () => {
    const marker = `sleep 4${Math.floor(Math.random() * 9)}.${Date.now() % 1000}`;
    const { page, id } = await openConversation([{ toolCalls: [{ name: 'bash', arguments: { command: marker } }] }], { initial_message: 'sleep a while' });
    await page.locator('.event-action pre.command', { hasText: marker }).waitFor({ timeout: 30_000 });
    await status(page).filter({ hasText: 'running' }).waitFor();
    await page.getByRole('button', { name: 'Pause' }).click();
    await status(page).filter({ hasText: 'paused' }).waitFor({ timeout: 20_000 });
    await page.locator('.event-state_update', { hasText: 'paused' }).waitFor();
    const runs = await api('GET', `/conversations/${id}/runs`);
    expect(runs.items[0].status).toBe('paused');

    // Run again from the page, then cancel that run.
    const second = `sleep 5${Math.floor(Math.random() * 9)}.${Date.now() % 1000}`;
    ui.llm.setScript([{ toolCalls: [{ name: 'bash', arguments: { command: second } }] }]);
    await page.getByRole('button', { name: 'Run' }).click();
    await page.locator('.event-action pre.command', { hasText: second }).waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: 'Cancel' }).click();
    await status(page).filter({ hasText: /^(paused|idle)$/ }).waitFor({ timeout: 20_000 });
    const statuses = async () => (await api('GET', `/conversations/${id}/runs`)).items.map((run: { status: string }) => run.status).sort();
    await expect.poll(statuses).toEqual(['canceled', 'paused']);
  });

  it('opens a conversation of 10,000 events on its tail and pages older ones in on scroll', { timeout: 90_000 }, async () => {
    const created = await api('POST', '/conversations', { title: 'ten thousand' });
    for (let index = 1; index <= 10_000; index += 1) {
      ui.server.services.recorder.append(created.id, { kind: 'message', source: index % 2 ? 'user' : 'agent', role: index % 2 ? 'user' : 'assistant', content: `line ${index}` });
    }
    const started = Date.now();
    const page = await signedIn(`#/c/${created.id}/timeline`);
    await page.locator('[data-testid=timeline] [data-seq="10000"]', { hasText: 'line 10000' }).waitFor({ timeout: 30_000 });
    process.stderr.write(`dashboard: 10,000-event conversation shown in ${Date.now() - started} ms (sign-in included)\n`);
    const cards = page.locator('[data-testid=timeline] [data-seq]');
    // Only the tail is rendered: one page, not the whole conversation.
    await expect.poll(() => cards.count()).toBe(200);
    expect(await cards.first().getAttribute('data-seq')).toBe('9801');
    // Scrolling to the top pages the previous 200 in, keeping the order.
    await page.locator('[data-testid=timeline]').evaluate((element) => element.scrollTo(0, 0));
    await expect.poll(() => cards.count(), { timeout: 10_000 }).toBe(400);
    const seqs = await cards.evaluateAll((elements) => elements.map((element) => Number(element.getAttribute('data-seq'))));
    expect(seqs).toEqual(Array.from({ length: 400 }, (_, index) => 9601 + index));
  });

  it('uploads files (picker and drag and drop) and downloads one byte for byte', { timeout: 60_000 }, async () => {
    const created = await api('POST', '/conversations', { title: 'files' });
    const page = await signedIn(`#/c/${created.id}/files`);
    const content = `line one\nünïcode ✓ ${Date.now()}\n`;
    await page.locator('[data-testid=upload-input]').setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from(content) });
    await page.locator('tr[data-path="notes.txt"]').waitFor();
    expect(fs.readFileSync(path.join(created.workdir, 'notes.txt'), 'utf8')).toBe(content);

    // Drag and drop: a real drop event carrying a file.
    // (Browser code as text: the tests' tsconfig has no DOM types.)
    await page.evaluate(`(() => {
      const zone = document.querySelector('[data-testid=dropzone]');
      const transfer = new DataTransfer();
      transfer.items.add(new File(['dropped bytes'], 'dropped.txt', { type: 'text/plain' }));
      zone.dispatchEvent(new DragEvent('dragover', { dataTransfer: transfer, bubbles: true, cancelable: true }));
      zone.dispatchEvent(new DragEvent('drop', { dataTransfer: transfer, bubbles: true, cancelable: true }));
    })()`);
    await page.locator('tr[data-path="dropped.txt"]').waitFor();
    expect(fs.readFileSync(path.join(created.workdir, 'dropped.txt'), 'utf8')).toBe('dropped bytes');

    const [download] = await Promise.all([page.waitForEvent('download'), page.locator('tr[data-path="notes.txt"] button', { hasText: 'download' }).click()]);
    expect(download.suggestedFilename()).toBe('notes.txt');
    const saved = path.join(tempDir('agentd-download-'), 'notes.txt');
    await download.saveAs(saved);
    expect(fs.readFileSync(saved, 'utf8')).toBe(content);
  });

  it('sets and deletes secrets by name (values never shown) and adds a webhook with its delivery log', { timeout: 60_000 }, async () => {
    const created = await api('POST', '/conversations', { title: 'settings' });
    const page = await signedIn(`#/c/${created.id}/secrets`);
    const value = `s3cret-${Date.now()}`;
    await page.fill('[data-testid=secrets] input[placeholder=NAME]', 'API_TOKEN');
    await page.fill('[data-testid=secrets] input[type=password]', value);
    await page.click('[data-testid=secrets] button[type=submit]');
    await page.locator('[data-testid=secrets] li', { hasText: 'API_TOKEN' }).waitFor();
    expect((await api('GET', `/conversations/${created.id}/secrets`)).names).toEqual(['API_TOKEN']);
    expect(await page.content()).not.toContain(value);
    await page.locator('[data-testid=secrets] li', { hasText: 'API_TOKEN' }).getByRole('button', { name: 'delete' }).click();
    await expect.poll(async () => (await api('GET', `/conversations/${created.id}/secrets`)).names).toEqual([]);

    await page.getByRole('button', { name: 'Webhooks' }).click();
    // A receiver that refuses: the delivery log shows the failed attempts.
    await page.fill('[data-testid=webhooks] input[placeholder^="https://"]', 'http://127.0.0.1:9/hook');
    await page.click('[data-testid=webhooks] button[type=submit]');
    const callback = page.locator('[data-testid=callback]', { hasText: 'http://127.0.0.1:9/hook' });
    await callback.waitFor();
    await api('POST', `/conversations/${created.id}/messages`, { content: 'an event to deliver', run: false });
    await callback.getByRole('button', { name: 'delivery log' }).click();
    await expect
      .poll(
        async () => {
          await callback.getByRole('button', { name: 'hide log' }).click();
          await callback.getByRole('button', { name: 'delivery log' }).click();
          // The log, opened again, fetches the deliveries: counted once it shows them or says there are none
          // (counted at once, right after the click, a fast machine could read it before they came, poll after poll).
          await callback.locator('[data-testid=deliveries]').or(callback.getByText('No deliveries yet.')).waitFor();
          return callback.locator('[data-testid=deliveries] tbody tr').count();
        },
        { timeout: 20_000 },
      )
      .toBeGreaterThan(0);
    expect(await callback.locator('[data-testid=deliveries]').innerText()).toMatch(/message/);
  });
});

describe.skipIf(chromiumMissing)('dashboard changes panel against the real /changes', () => {
  it('lists the files the agent changed with their diffs, and shows the rewind that undid them', { timeout: 90_000 }, async () => {
    const { page, id } = await openConversation(
      [{ toolCalls: [{ name: 'bash', arguments: { command: 'printf "one\\ntwo\\n" > notes.md && rm old.txt' } }] }, { text: 'edited' }],
      { title: 'changes', run: false, initial_message: 'edit files' },
    );
    const workdir = (await api('GET', `/conversations/${id}`)).workdir as string;
    fs.writeFileSync(path.join(workdir, 'old.txt'), 'old\n');
    await api('POST', `/conversations/${id}/run`);
    await expect.poll(async () => (await api('GET', `/conversations/${id}`)).status, { timeout: 30_000 }).toBe('idle');

    await page.goto(`${ui.server.url}/ui#/c/${id}/files`);
    const panel = page.locator('[data-testid=changes]');
    await panel.locator('details').nth(1).waitFor();
    expect(await panel.locator('summary').allInnerTexts()).toEqual(['added notes.md', 'deleted old.txt']);
    await panel.locator('summary', { hasText: 'notes.md' }).click();
    const added = panel.locator('details', { hasText: 'notes.md' }).locator('.diff-add');
    expect(await added.allInnerTexts()).toEqual(expect.arrayContaining([expect.stringContaining('one'), expect.stringContaining('two')]));

    // Rewind the files to before the run: the panel (refreshed) is empty, the timeline shows the rewind.
    const first = (await api('GET', `/conversations/${id}/checkpoints?limit=1`)).items[0];
    await api('POST', `/conversations/${id}/rewind`, { checkpoint_id: first.id, conversation: false });
    await panel.getByRole('button', { name: 'refresh' }).click();
    await panel.getByText('No changes since the conversation started.').waitFor();
    await page.goto(`${ui.server.url}/ui#/c/${id}/timeline`);
    const rewind = page.locator('[data-testid=timeline] .event-rewind');
    await rewind.waitFor();
    expect(await rewind.innerText()).toMatch(/rewound files to before #\d+/);
  });
});
