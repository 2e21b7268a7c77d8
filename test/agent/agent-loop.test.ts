import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';

let harness: AgentHarness;
afterEach(async () => harness?.close());

describe('agent loop', () => {
  it('runs tool calls in order, records action/observation pairs and finishes', async () => {
    harness = await startAgentHarness([
      {
        text: 'I will create the file.',
        toolCalls: [
          { name: 'file_editor', arguments: { command: 'create', path: 'hello.txt', file_text: 'hello\n' } },
          { name: 'file_editor', arguments: { command: 'view', path: 'hello.txt' } },
        ],
      },
      { toolCalls: [{ name: 'finish', arguments: { message: 'Created hello.txt' } }] },
    ]);
    const id = await harness.createConversation({ initial_message: 'create hello.txt' });
    const done = await harness.waitForStatus(id, ['finished', 'error', 'idle']);
    expect(done.status).toBe('finished');
    expect(fs.readFileSync(path.join(done.workdir, 'hello.txt'), 'utf8')).toBe('hello\n');

    const events = await harness.events(id);
    const kinds = events.map((event) => event.kind);
    expect(kinds.slice(0, 4)).toEqual(['message', 'state_update', 'system_prompt', 'usage']);
    const calls = events.filter((event) => event.kind === 'action' || event.kind === 'observation').map((event) => `${event.kind}:${event.tool_name}`);
    expect(calls).toEqual(['action:file_editor', 'observation:file_editor', 'action:file_editor', 'observation:file_editor', 'action:finish', 'observation:finish']);
    expect(events.at(-1)).toMatchObject({ kind: 'state_update', status: 'finished' });

    expect(harness.llm.violations).toEqual([]);
    const second = harness.llm.requests[1]!.body as any;
    expect(second.messages[0].role).toBe('system');
    expect(second.tools.map((tool: any) => tool.function.name)).toContain('file_editor');
    const assistant = second.messages.find((message: any) => message.role === 'assistant');
    expect(assistant.tool_calls).toHaveLength(2);
    const toolMessages = second.messages.filter((message: any) => message.role === 'tool');
    expect(toolMessages.map((message: any) => message.tool_call_id)).toEqual(assistant.tool_calls.map((call: any) => call.id));

    const runs = await harness.get(`/conversations/${id}/runs`);
    expect(runs.body.items).toHaveLength(1);
    expect(runs.body.items[0]).toMatchObject({ status: 'completed', outcome: 'finished', iterations: 2 });
    const conversation = await harness.get(`/conversations/${id}`);
    expect(conversation.body.usage.prompt_tokens).toBeGreaterThan(0);
  });

  it('answers without tools: agent message and idle; unknown tools and bad arguments come back as errors', async () => {
    harness = await startAgentHarness([
      { toolCalls: [{ name: 'no_such_tool', arguments: {} }, { name: 'file_editor', arguments: '{not json' }, { name: 'glob', arguments: { wrong: 1 } }] },
      { text: 'All done here.' },
    ]);
    const id = await harness.createConversation({ initial_message: 'hi' });
    const done = await harness.waitForStatus(id, ['idle', 'error', 'finished']);
    expect(done.status).toBe('idle');
    const events = await harness.events(id);
    const observations = events.filter((event) => event.kind === 'observation');
    expect(observations.map((event) => event.is_error)).toEqual([true, true, true]);
    expect(observations[0].content).toContain('no tool named');
    expect(events.filter((event) => event.kind === 'message').at(-1)).toMatchObject({ source: 'agent', content: 'All done here.' });
    expect(harness.llm.violations).toEqual([]);
  });

  it('records the system prompt with the tool schemas and appends AGENTS.md from the workdir', async () => {
    harness = await startAgentHarness([{ text: 'hello' }]);
    const workdir = fs.mkdtempSync(path.join(harness.server.dataDir, '..', 'agentd-agents-md-'));
    fs.writeFileSync(path.join(workdir, 'AGENTS.md'), 'Always run `make check` before finishing.\n');
    const id = await harness.createConversation({ workdir, tools: ['bash', 'finish'], initial_message: 'hi' });
    await harness.waitForStatus(id, ['idle']);
    const prompt = (await harness.events(id)).find((event) => event.kind === 'system_prompt');
    expect(prompt.content).toContain('Always run `make check` before finishing.');
    expect(prompt.tools.map((tool: any) => tool.name)).toEqual(['bash', 'finish']);
    const sent = harness.llm.requests[0]!.body as any;
    expect(sent.messages[0]).toMatchObject({ role: 'system', content: prompt.content });
    expect(sent.tools.map((tool: any) => tool.function.name)).toEqual(['bash', 'finish']);
    expect(sent.tools[0].function.parameters.properties.command.type).toBe('string');
  });
});
