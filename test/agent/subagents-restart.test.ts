import { describe, expect, it } from 'vitest';
import { tempDir, TEST_KEY } from '../support/agentd.js';
import { restartableServer } from '../support/restartable-server.js';
import { processAlive, waitForProcess } from '../support/processes.js';

const auth = { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' };
const agentd = restartableServer();
const { api } = agentd;

describe('restart while a subagent runs (the built server, killed with SIGKILL)', () => {
  it('comes back paused with the open calls of the subagent and of its task call closed; the next run sends a valid history', { timeout: 120_000 }, async () => {
    const marker = `sleep 6${Math.floor(Math.random() * 9)}.${Date.now() % 1000}`;
    const llm = await agentd.fakeLlm({
      script: [{ toolCalls: [{ id: 'task_r', name: 'task', arguments: { description: 'slow', prompt: 'RESTART-JOB' } }] }, { text: 'resumed fine' }],
      routes: [{ when: 'RESTART-JOB', script: [{ toolCalls: [{ id: 'child_bash', name: 'bash', arguments: { command: marker } }] }] }],
    });
    const dataDir = tempDir();
    let server = await agentd.start({ dataDir });
    const created = await api('/conversations', { method: 'POST', body: JSON.stringify({ llm: { model: 'fake', base_url: llm.url, api_key: 'k' }, initial_message: 'go' }) });
    await waitForProcess(marker, 45_000);
    const before = (await api(`/conversations/${created.id}/events?limit=1000`)).items;
    expect(before.at(-1)).toMatchObject({ kind: 'action', tool_call_id: 'child_bash', parent_tool_call_id: 'task_r' });

    server = await agentd.restart();

    const conversation = await api(`/conversations/${created.id}`);
    expect(conversation.status).toBe('paused');
    const after = (await api(`/conversations/${created.id}/events?limit=1000`)).items;
    const tail = after.slice(before.length);
    expect(tail[0]).toMatchObject({ kind: 'observation', tool_call_id: 'child_bash', is_error: true, parent_tool_call_id: 'task_r', agent: 'general-purpose', data: { interrupted: true } });
    expect(tail[1]).toMatchObject({ kind: 'observation', tool_call_id: 'task_r', tool_name: 'task', is_error: true, data: { interrupted: true } });
    expect(tail[1].parent_tool_call_id).toBeUndefined();
    expect(tail.find((event: any) => event.kind === 'state_update')).toMatchObject({ status: 'paused' });
    expect((await api(`/conversations/${created.id}/runs`)).items[0]).toMatchObject({ status: 'paused', outcome: 'server_restart' });
    // The subagent's shell was reaped with the dead server's others.
    expect(processAlive(marker)).toBe(false);

    expect((await fetch(`${server.url}/conversations/${created.id}/run`, { method: 'POST', headers: auth, body: '{}' })).status).toBe(202);
    const deadline = Date.now() + 45_000;
    while ((await api(`/conversations/${created.id}`)).status !== 'idle' && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(llm.violations).toEqual([]);
    const last = llm.requests.at(-1)!.body as any;
    expect(last.messages.filter((message: any) => message.role === 'tool').map((message: any) => message.tool_call_id)).toEqual(['task_r']);
    expect(JSON.stringify(last.messages)).not.toContain(marker);
  });
});
