/**
 * The dashboard renders the v2 event shapes of the contract (api.md "v2 additions": subagent
 * events carrying `parent_tool_call_id`/`agent`, `hook`, `question`) and answers a question
 * through POST /answer when the server has it. Those are built by other issues (14, 15): until
 * they land, this test serves their documented shapes to the page from the browser's side
 * (playwright routes) around a real server and a real conversation, and checks what the page does
 * with them. The end-to-end tests of what the server does today are dashboard.test.ts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startServer, TEST_KEY, type TestServer } from '../support/agentd.js';
import { chromiumMissing, launchBrowser, type TestBrowser } from '../support/browser.js';

if (chromiumMissing) process.stderr.write(`dashboard-v2-events.test.ts ${chromiumMissing}\n`);

let browser: TestBrowser;
let server: TestServer;

beforeAll(async () => {
  if (chromiumMissing) return;
  browser = await launchBrowser();
  server = await startServer();
}, 60_000);
afterEach(async (context) => {
  if (context.task.result?.state === 'fail') await browser?.screenshots(context.task.name);
  await browser?.closePages();
});
afterAll(async () => {
  await browser?.close();
  await server?.close();
});

function v2Events(conversationId: string): Array<Record<string, unknown>> {
  let seq = 0;
  const event = (fields: Record<string, unknown>) => ({ id: crypto.randomUUID(), seq: ++seq, conversation_id: conversationId, timestamp: new Date().toISOString(), ...fields });
  return [
    event({ kind: 'message', source: 'user', role: 'user', content: 'explore, then ask me' }),
    event({ kind: 'action', source: 'agent', tool_call_id: 'call_task', tool_name: 'task', arguments: { description: 'Explore the repo', prompt: 'list files' }, thought: '', run_id: null }),
    event({ kind: 'action', source: 'agent', tool_call_id: 'call_sub', tool_name: 'bash', arguments: { command: 'ls -la' }, thought: '', run_id: null, parent_tool_call_id: 'call_task', agent: 'explorer' }),
    event({ kind: 'hook', source: 'system', hook_point: 'PreToolUse', matcher: 'bash', hook: './check.sh', duration_ms: 12, decision: 'block', reason: 'no listing today', parent_tool_call_id: 'call_task', agent: 'explorer' }),
    event({ kind: 'observation', source: 'environment', tool_call_id: 'call_sub', tool_name: 'bash', content: 'blocked', is_error: true, data: {}, parent_tool_call_id: 'call_task', agent: 'explorer' }),
    event({ kind: 'observation', source: 'environment', tool_call_id: 'call_task', tool_name: 'task', content: 'the explorer was blocked', is_error: false, data: {} }),
    event({ kind: 'question', source: 'agent', tool_call_id: 'call_q', question: 'Which **branch**?', options: ['main', 'dev'] }),
  ];
}

describe.skipIf(chromiumMissing)('dashboard with the v2 event kinds', () => {
  it('nests subagent events under their task call, shows hooks, and answers a question with POST /answer', { timeout: 60_000 }, async () => {
    const conversation = (await server.services.conversations.create({ title: 'v2 shapes', max_iterations_per_run: 500, confirmation_mode: false })).conversation;
    const events = v2Events(conversation.id);
    const page = await browser.newPage();
    const answers: unknown[] = [];
    await page.route('**/openapi.json', async (route) => {
      const document = (await (await fetch(`${server.url}/openapi.json`)).json()) as { paths: Record<string, unknown> };
      document.paths['/conversations/{id}/answer'] = { post: {} };
      await route.fulfill({ json: document });
    });
    await page.route(`**/conversations/${conversation.id}/events?*`, (route) => route.fulfill({ json: { items: [...events].reverse(), next_page_id: null } }));
    await page.route(`**/conversations/${conversation.id}`, async (route) => {
      const real = (await (await fetch(`${server.url}/conversations/${conversation.id}`, { headers: server.auth })).json()) as Record<string, unknown>;
      await route.fulfill({ json: { ...real, status: 'waiting_for_input' } });
    });
    await page.route(`**/conversations/${conversation.id}/answer`, async (route) => {
      answers.push(route.request().postDataJSON());
      await route.fulfill({ status: 202, json: {} });
    });

    await page.goto(`${server.url}/ui#/c/${conversation.id}/timeline`);
    await page.fill('input[name=key]', TEST_KEY);
    await page.click('button[type=submit]');
    const task = page.locator('[data-testid=timeline] .event-action[data-seq="2"]');
    await task.waitFor();
    // A conversation created without an LLM (this server has no default) still renders.
    expect(await page.locator('.conversation-head .subtle').innerText()).toContain('no LLM configured');
    // The subagent's action, hook and observation sit inside the task call, tagged with the agent.
    const nested = task.locator('.nested [data-seq]');
    expect(await nested.evaluateAll((cards) => cards.map((card) => card.getAttribute('data-seq')))).toEqual(['3', '4', '5']);
    expect(await task.locator('.nested [data-seq="3"] .event-meta').innerText()).toContain('explorer');
    expect(await task.locator('.nested [data-seq="3"] pre.command').innerText()).toBe('$ ls -la');
    const hook = task.locator('.nested [data-seq="4"]');
    expect(await hook.innerText()).toMatch(/hook PreToolUse \[bash\] \.\/check\.sh → block · 12 ms · no listing today/);
    expect(await hook.getAttribute('class')).toContain('is-error');
    // Top level: the message, the task, its observation and the question; nothing twice.
    const top = await page.locator('[data-testid=timeline] .events > [data-seq]').evaluateAll((cards) => cards.map((card) => card.getAttribute('data-seq')));
    expect(top).toEqual(['1', '2', '6', '7']);

    const question = page.locator('[data-testid=question]');
    await question.waitFor();
    expect(await question.innerText()).toContain('Which **branch**?');
    await question.getByRole('button', { name: 'dev' }).click();
    await expect.poll(() => answers).toEqual([{ tool_call_id: 'call_q', content: 'dev' }]);
  });
});
