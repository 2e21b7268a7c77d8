// The project's permission rules are kept on the conversation's record: a restart does not read
// them again from a .claude/settings.json the agent has rewritten meanwhile.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../support/agentd.js';
import { RESTART_TEST_TIMEOUT, restartableServer } from '../support/restartable-server.js';

const agentd = restartableServer();
const { api } = agentd;

async function idleAfter(id: string, requests: number): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (agentd.llm.requests.length >= requests && (await api(`/conversations/${id}`)).status === 'idle') return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`conversation ${id} did not end its run`);
}

describe("the project's rules across a restart", () => {
  it('stay as read before the first tool call, whatever the agent wrote to the file since', { timeout: RESTART_TEST_TIMEOUT }, async () => {
    const bash = (command: string) => ({ toolCalls: [{ name: 'bash', arguments: { command } }] });
    const llm = await agentd.fakeLlm([bash("echo '{}' > .claude/settings.json"), { text: 'rules gone' }, bash('rm -rf victim'), { text: 'done' }]);
    await agentd.start({ dataDir: tempDir() });
    const created = await api('/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake', base_url: llm.url, api_key: 'k' } }) });
    const workdir = created.workdir as string;
    fs.mkdirSync(path.join(workdir, '.claude'));
    fs.writeFileSync(path.join(workdir, '.claude', 'settings.json'), JSON.stringify({ permissions: { deny: ['bash(rm -rf*)'] } }));
    fs.mkdirSync(path.join(workdir, 'victim'));
    fs.writeFileSync(path.join(workdir, 'victim', 'keep.txt'), 'still here');

    await api(`/conversations/${created.id}/messages`, { method: 'POST', body: JSON.stringify({ content: 'first' }) });
    await idleAfter(created.id, 2);
    expect(fs.readFileSync(path.join(workdir, '.claude', 'settings.json'), 'utf8').trim()).toBe('{}');

    await agentd.restart();
    await api(`/conversations/${created.id}/messages`, { method: 'POST', body: JSON.stringify({ content: 'second' }) });
    await idleAfter(created.id, 4);
    expect(fs.readFileSync(path.join(workdir, 'victim', 'keep.txt'), 'utf8')).toBe('still here');
    const events = (await api(`/conversations/${created.id}/events?limit=1000`)).items as any[];
    expect(events.filter((event) => event.kind === 'rejection')).toMatchObject([{ tool_name: 'bash', rule: 'deny: bash(rm -rf*)' }]);
    expect(llm.violations).toEqual([]);
  });
});
