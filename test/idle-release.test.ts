import { afterEach, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from './support/agent-harness.js';
import { processAlive, waitForProcess } from './support/processes.js';

let harness: AgentHarness;
afterEach(async () => harness?.close());

const bash = (command: string) => ({ toolCalls: [{ name: 'bash', arguments: { command } }] });

/** Waits (bounded) until no process's command line contains `pattern`. */
async function waitForNoProcess(pattern: string, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (processAlive(pattern)) {
    if (Date.now() > until) throw new Error(`a process matching ${JSON.stringify(pattern)} is still there after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('AGENTD_IDLE_TIMEOUT_S', () => {
  it("releases an idle conversation's shell with every process; the next run restores its directory and exports and tells the LLM", async () => {
    const marker = `sleep 7${Math.floor(Math.random() * 90) + 10}.${Date.now() % 1000}`;
    harness = await startAgentHarness(
      [
        bash(`mkdir -p sub && cd sub && export KEPT_VALUE=kept-1; ${marker} &`),
        { text: 'first done' },
        bash('pwd; echo "value=$KEPT_VALUE"'),
        { text: 'second done' },
      ],
      { env: { AGENTD_IDLE_TIMEOUT_S: '1' } },
    );
    const id = await harness.createConversation({ initial_message: 'start' });
    await harness.waitForStatus(id, ['idle', 'error']);
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;
    // The run is over; its background job and the shell (with its sandbox, whose bwrap names the workdir) live until the timeout.
    await waitForProcess(marker);
    await waitForNoProcess(marker, 15_000);
    await waitForNoProcess(workdir, 5_000);

    expect((await harness.post(`/conversations/${id}/messages`, { content: 'again' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle', 'error']);
    const observations = (await harness.events(id)).filter((event) => event.kind === 'observation');
    expect(observations).toHaveLength(2);
    const second = observations[1];
    expect(second.data.exit_code).toBe(0);
    expect(second.content).toMatch(/The shell was stopped after 1 s idle and restarted/);
    expect(second.content).toContain(`${workdir}/sub\n`);
    expect(second.content).toContain('value=kept-1');
    // The LLM saw it: the tool result of its last request carries the note.
    const last = harness.llm.requests.at(-1)!;
    const toolMessages = (last.body.messages ?? []).filter((message) => message.role === 'tool');
    expect(JSON.stringify(toolMessages.at(-1)?.content)).toContain('The shell was stopped after 1 s idle');
  });
});
