import { describe, expect, it } from 'vitest';
import { isSummaryRequest } from '../fake-llm/fake-llm-server.js';
import { tempDir } from '../support/agentd.js';
import { restartableServer } from '../support/restartable-server.js';
import { waitForProcess } from '../support/processes.js';

const agentd = restartableServer();
const { api } = agentd;

const post = (path: string, body: unknown) => api(path, { method: 'POST', body: JSON.stringify(body) });

async function waitIdle(id: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while ((await api(`/conversations/${id}`)).status !== 'idle') {
    if (Date.now() > deadline) throw new Error('the conversation never became idle');
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The messages of the agent's last request (condensation requests left out), without the system prompt. */
function lastMessages(): unknown[] {
  const agent = agentd.llm.requests.filter((request) => !isSummaryRequest(request.body));
  return agent.at(-1)!.body.messages!.slice(1);
}

describe('condensation and rollback across a kill -9 (built server)', () => {
  it('the history fold rebuilds the condensed and the rolled-back view from the log', async () => {
    const slow = `sleep 4${Math.floor(Math.random() * 9)}.${Date.now() % 1000}`;
    const bash = (command: string, prompt = 200) => ({ toolCalls: [{ name: 'bash', arguments: { command } }], usage: { prompt_tokens: prompt, completion_tokens: 5 } });
    const llm = await agentd.fakeLlm({
      summarizer: true,
      script: [
        bash('seq 1 2000; echo one'), bash('seq 1 2000; echo two'), bash('echo three'), { text: 'all done', usage: { prompt_tokens: 300, completion_tokens: 5 } },
        { text: 'earlier answer' }, bash(`${slow}; echo task-a`), { text: 'doing task B' },
        { text: 'A after the restart' }, { text: 'B after the restart' },
      ],
    });
    const dataDir = tempDir();
    await agentd.start({ dataDir });
    const llmConfig = { model: 'fake', base_url: llm.url, api_key: 'k' };

    const condensed = await post('/conversations', { llm: llmConfig, condenser: { max_tokens: 8000, keep_last: 2 }, initial_message: 'three steps' });
    await waitIdle(condensed.id);
    // One or two (the estimate may pass the threshold at the second request already): the last one is in the view.
    const condensations = (await api(`/conversations/${condensed.id}/events?kind=condensation`)).items;
    const condensation = condensations.at(-1);
    // Estimated before the third request: the system prompt and tools (about 5,000 tokens) and two long results.
    expect(condensation.trigger).toBe('auto');
    expect(condensation.tokens_before).toBeGreaterThan(8000);
    const condensedBefore = lastMessages();
    expect((condensedBefore[1] as { content: string }).content).toContain(condensation.summary);

    const rolled = await post('/conversations', { llm: llmConfig, initial_message: 'hello' });
    await waitIdle(rolled.id);
    await post(`/conversations/${rolled.id}/messages`, { content: 'task A' });
    await waitForProcess(slow, 15_000);
    const taken = await post(`/conversations/${rolled.id}/messages`, { content: 'task B instead', multitask_strategy: 'rollback' });
    expect(taken.event.multitask_strategy).toBe('rollback');
    await waitIdle(rolled.id);
    const rolledBefore = lastMessages();
    expect(rolledBefore).toEqual([
      { role: 'user', content: 'hello' },
      { role: 'assistant', content: 'earlier answer' },
      { role: 'user', content: 'task B instead' },
    ]);

    await agentd.restart();

    await post(`/conversations/${condensed.id}/messages`, { content: 'still there?' });
    await waitIdle(condensed.id);
    expect(lastMessages()).toEqual([...condensedBefore, { role: 'assistant', content: 'all done' }, { role: 'user', content: 'still there?' }]);

    await post(`/conversations/${rolled.id}/messages`, { content: 'and now?' });
    await waitIdle(rolled.id);
    expect(lastMessages()).toEqual([...rolledBefore, { role: 'assistant', content: 'doing task B' }, { role: 'user', content: 'and now?' }]);
    // The log kept every event of both.
    const kinds = (await api(`/conversations/${rolled.id}/events?limit=1000`)).items.map((event: any) => event.kind);
    expect(kinds.filter((kind: string) => kind === 'action')).toHaveLength(1);
    expect(kinds).toContain('rollback');
    expect(llm.violations).toEqual([]);
    expect(llm.summaryRequests).toHaveLength(condensations.length);
  }, 60_000);
});
