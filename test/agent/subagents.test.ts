import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { RecordedRequest } from '../fake-llm/fake-llm-server.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { tempDir } from '../support/agentd.js';
import { processAlive, waitForProcess } from '../support/processes.js';
import { connectSse } from '../support/sse-client.js';

let harness: AgentHarness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const firstUser = (request: RecordedRequest) => String(request.body.messages?.find((message) => message.role === 'user')?.content ?? '');
const toolNames = (request: RecordedRequest) => (request.body.tools ?? []).map((tool) => tool.function.name);

/** Resolves once the fake has received a request whose first user message contains `marker`. */
async function requestArrived(marker: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!harness!.llm.requests.some((request) => firstUser(request).includes(marker))) {
    if (Date.now() > deadline) throw new Error(`no request for ${marker}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('subagents (task)', () => {
  it('runs two subagents concurrently; their events nest under their task calls in one SSE stream and stay out of the main history', async () => {
    harness = await startAgentHarness([
      {
        text: 'Splitting the work.',
        toolCalls: [
          { id: 'task_alpha', name: 'task', arguments: { description: 'alpha part', prompt: 'ALPHA-JOB: say alpha' } },
          { id: 'task_beta', name: 'task', arguments: { description: 'beta part', prompt: 'BETA-JOB: say beta' } },
        ],
      },
      { text: 'both done' },
    ]);
    // Each subagent's first answer waits until the other one has asked too: run one after the other, they would never meet.
    harness.llm.route({ when: 'ALPHA-JOB', script: [async () => (await requestArrived('BETA-JOB'), { toolCalls: [{ name: 'bash', arguments: { command: 'echo alpha-$((20+1))' } }] }), { text: 'alpha result: 21' }] });
    harness.llm.route({ when: 'BETA-JOB', script: [async () => (await requestArrived('ALPHA-JOB'), { toolCalls: [{ name: 'bash', arguments: { command: 'echo beta-$((30+2))' } }] }), { text: 'beta result: 32' }] });
    const id = await harness.createConversation({ hooks: { SubagentStop: [{ hooks: [{ type: 'command', command: 'cat > /dev/null' }] }] } });
    const stream = await connectSse(`${harness.server.url}/conversations/${id}/events/stream`, harness.server.auth);
    try {
      await harness.post(`/conversations/${id}/messages`, { content: 'do both parts' });
      await stream.waitFor((messages) => messages.some((message) => message.event === 'state_update' && JSON.parse(message.data).status === 'idle'), 30_000);
    } finally {
      stream.close();
    }
    const events = stream.messages.filter((message) => message.event !== 'message_delta').map((message) => JSON.parse(message.data));
    const index = (predicate: (event: any) => boolean) => events.findIndex(predicate);
    for (const [callId, word, agentSays] of [['task_alpha', 'alpha', 'alpha result: 21'], ['task_beta', 'beta', 'beta result: 32']] as const) {
      const child = events.filter((event) => event.parent_tool_call_id === callId);
      expect(child.every((event) => event.agent === 'general-purpose')).toBe(true);
      expect(child.map((event) => event.kind)).toEqual(['system_prompt', 'message', 'usage', 'action', 'observation', 'usage', 'message', 'hook']);
      expect(child[1]).toMatchObject({ source: 'agent', role: 'user', content: `${word.toUpperCase()}-JOB: say ${word}` });
      expect(child[4]).toMatchObject({ tool_name: 'bash', content: expect.stringContaining(`${word}-`), is_error: false });
      expect(child[7]).toMatchObject({ hook_point: 'SubagentStop', decision: 'allow' });
      // Nested: between the task call and its observation, whose content is the subagent's last reply.
      const start = index((event) => event.kind === 'action' && event.tool_call_id === callId);
      const end = index((event) => event.kind === 'observation' && event.tool_call_id === callId);
      expect(start).toBeGreaterThanOrEqual(0);
      for (const event of child) expect(events.indexOf(event)).toBeGreaterThan(start);
      for (const event of child) expect(events.indexOf(event)).toBeLessThan(end);
      expect(events[end]).toMatchObject({ tool_name: 'task', is_error: false, content: agentSays, data: { agent: 'general-purpose', outcome: 'idle' } });
      expect(events[end].parent_tool_call_id).toBeUndefined();
    }
    // Concurrent: both had started before either finished.
    const firstObservation = index((event) => event.kind === 'observation' && event.tool_name === 'task');
    expect(index((event) => event.parent_tool_call_id === 'task_alpha')).toBeLessThan(firstObservation);
    expect(index((event) => event.parent_tool_call_id === 'task_beta')).toBeLessThan(firstObservation);

    // Each subagent had a history of its own: its system prompt and its task, nothing of the parent's.
    const alphaFirst = harness.llm.requests.find((request) => firstUser(request).includes('ALPHA-JOB'))!;
    expect(alphaFirst.body.messages!.map((message) => message.role)).toEqual(['system', 'user']);
    expect(String(alphaFirst.body.messages![0]!.content)).toContain('# You are a subagent');
    expect(toolNames(alphaFirst)).not.toContain('task'); // depth limit 1
    expect(toolNames(alphaFirst)).toContain('bash');
    // The main agent's next request has the two results and none of the subagents' own steps.
    const mainLast = harness.llm.requests.at(-1)!;
    expect(firstUser(mainLast)).toBe('do both parts');
    const text = JSON.stringify(mainLast.body.messages);
    expect(text).toContain('alpha result: 21');
    expect(text).toContain('beta result: 32');
    expect(text).not.toContain('echo alpha');
    expect(text).not.toContain('# You are a subagent');
    expect(harness.llm.violations).toEqual([]);

    // Usage: the conversation's includes the subagents', the run says how much each agent spent.
    const conversation = (await harness.get(`/conversations/${id}`)).body;
    const run = (await harness.get(`/conversations/${id}/runs`)).body.items[0];
    const usages = events.filter((event) => event.kind === 'usage');
    const sum = (list: any[]) => list.reduce((total, event) => total + event.prompt_tokens, 0);
    expect(conversation.usage.prompt_tokens).toBe(sum(usages));
    expect(run.usage.prompt_tokens).toBe(sum(usages));
    expect(run.usage_by_agent['general-purpose'].prompt_tokens).toBe(sum(usages.filter((event) => event.agent === 'general-purpose')));
    expect(run.usage_by_agent['general-purpose'].prompt_tokens).toBeGreaterThan(0);
  });

  it('gives a defined agent only its tools (never more than the parent has), its own prompt, and reports an unknown type', async () => {
    harness = await startAgentHarness([
      { toolCalls: [{ id: 'task_1', name: 'task', arguments: { description: 'find', prompt: 'FINDER-JOB', subagent_type: 'finder' } }] },
      { toolCalls: [{ id: 'task_2', name: 'task', arguments: { description: 'x', prompt: 'x', subagent_type: 'nobody' } }] },
      { text: 'ok' },
    ]);
    harness.llm.route({ when: 'FINDER-JOB', script: [{ toolCalls: [{ name: 'bash', arguments: { command: 'echo should-not-run' } }] }, { text: 'found nothing' }] });
    const id = await harness.createConversation({
      tools: ['bash', 'glob', 'task', 'finish'],
      agents: { finder: { description: 'Finds files', prompt: 'FINDER-PROMPT: you find files.', tools: ['Glob', 'Grep', 'bash'], model: 'finder-model' } },
    });
    await harness.post(`/conversations/${id}/messages`, { content: 'go' });
    await harness.waitForStatus(id, ['idle']);
    const finder = harness.llm.requests.find((request) => firstUser(request).includes('FINDER-JOB'))!;
    expect(String(finder.body.messages![0]!.content)).toMatch(/^FINDER-PROMPT: you find files\./);
    // Glob → glob and bash: yes; Grep → grep: not the parent's, so not the child's.
    expect(toolNames(finder).sort()).toEqual(['bash', 'glob']);
    expect(finder.body.model).toBe('finder-model');
    expect(harness.llm.requests[0]!.body.model).toBe('fake-model');
    const observations = (await harness.events(id)).filter((event) => event.kind === 'observation' && !event.parent_tool_call_id);
    expect(observations[0]).toMatchObject({ tool_name: 'task', content: 'found nothing', data: { agent: 'finder' } });
    expect(observations[1]).toMatchObject({ tool_name: 'task', is_error: true, content: expect.stringContaining('There is no subagent type "nobody". Available: finder, general-purpose.') });
  });

  it("a workdir's agent file cannot pick a model outside AGENTD_SUBAGENT_MODELS: it runs on the conversation's, and the task result says so", async () => {
    const workdir = tempDir('agentd-subagent-model-');
    try {
      fs.mkdirSync(path.join(workdir, '.claude', 'agents'), { recursive: true });
      fs.writeFileSync(path.join(workdir, '.claude', 'agents', 'pricey.md'), '---\nname: pricey\ndescription: Costs a lot\nmodel: very-expensive-model\n---\nPRICEY-PROMPT\n');
      for (const [env, expected] of [[{}, 'fake-model'], [{ AGENTD_SUBAGENT_MODELS: 'other-model, very-expensive-model' }, 'very-expensive-model']] as const) {
        harness = await startAgentHarness([{ toolCalls: [{ id: 'task_1', name: 'task', arguments: { description: 'spend', prompt: 'PRICEY-JOB', subagent_type: 'pricey' } }] }, { text: 'ok' }], { env });
        harness.llm.route({ when: 'PRICEY-JOB', script: [{ text: 'spent' }] });
        const id = await harness.createConversation({ workdir });
        await harness.post(`/conversations/${id}/messages`, { content: 'go' });
        await harness.waitForStatus(id, ['idle']);
        const child = harness.llm.requests.find((request) => firstUser(request).includes('PRICEY-JOB'))!;
        expect(String(child.body.messages![0]!.content)).toContain('PRICEY-PROMPT');
        expect(child.body.model).toBe(expected);
        const observation = (await harness.events(id)).find((event) => event.kind === 'observation' && event.tool_name === 'task');
        if (expected === 'fake-model') {
          expect(observation.data).toMatchObject({ agent: 'pricey', model_refused: 'very-expensive-model' });
          expect(observation.content).toMatch(/^\[agentd: the agent file \.claude\/agents\/pricey\.md asks for the model "very-expensive-model", which the operator does not allow \(AGENTD_SUBAGENT_MODELS\); it ran on the conversation's model\.\]\n\nspent$/);
        } else {
          expect(observation).toMatchObject({ content: 'spent', data: { agent: 'pricey' } });
          expect(observation.data.model_refused).toBeUndefined();
        }
        await harness.close();
        harness = undefined;
      }
    } finally {
      fs.rmSync(workdir, { recursive: true, force: true });
    }
  });

  it('a subagent inherits the permission rules: a denied call is refused inside it', async () => {
    harness = await startAgentHarness([{ toolCalls: [{ id: 'task_1', name: 'task', arguments: { description: 'rm', prompt: 'RM-JOB' } }] }, { text: 'ok' }]);
    harness.llm.route({ when: 'RM-JOB', script: [{ toolCalls: [{ name: 'bash', arguments: { command: 'rm -rf build' } }] }, { text: 'could not remove' }] });
    const id = await harness.createConversation({ permissions: { deny: ['bash(rm *)'] } });
    await harness.post(`/conversations/${id}/messages`, { content: 'go' });
    await harness.waitForStatus(id, ['idle']);
    const rejection = (await harness.events(id)).find((event) => event.kind === 'rejection');
    expect(rejection).toMatchObject({ source: 'system', tool_name: 'bash', rule: 'deny: bash(rm *)', parent_tool_call_id: 'task_1', agent: 'general-purpose' });
  });

  it('pause reaches a subagent in the middle of a tool: its call and the task call are closed, its shell stopped, and the next run is valid', async () => {
    const marker = `sleep 7${Math.floor(Math.random() * 9)}.${Date.now() % 1000}`;
    harness = await startAgentHarness([{ toolCalls: [{ id: 'task_slow', name: 'task', arguments: { description: 'slow', prompt: 'SLOW-JOB' } }] }, { text: 'resumed' }]);
    harness.llm.route({ when: 'SLOW-JOB', script: [{ toolCalls: [{ name: 'bash', arguments: { command: marker } }] }] });
    const id = await harness.createConversation();
    await harness.post(`/conversations/${id}/messages`, { content: 'go slow' });
    await waitForProcess(marker, 15_000);
    const started = Date.now();
    expect((await harness.post(`/conversations/${id}/pause`)).status).toBeLessThan(300);
    await harness.waitForStatus(id, ['paused']);
    expect(Date.now() - started).toBeLessThan(8_000);
    const events = await harness.events(id);
    const childBash = events.find((event) => event.kind === 'observation' && event.parent_tool_call_id === 'task_slow' && event.tool_name === 'bash');
    expect(childBash).toMatchObject({ agent: 'general-purpose', content: expect.stringContaining('Interrupted') });
    const task = events.find((event) => event.kind === 'observation' && event.tool_call_id === 'task_slow');
    expect(task).toMatchObject({ tool_name: 'task', is_error: true, data: { interrupted: true } });
    expect(events.indexOf(childBash)).toBeLessThan(events.indexOf(task));
    await expect.poll(() => processAlive(marker), { timeout: 10_000 }).toBe(false);
    const run = (await harness.get(`/conversations/${id}/runs`)).body.items[0];
    expect(run).toMatchObject({ status: 'paused', outcome: 'paused' });

    expect((await harness.post(`/conversations/${id}/run`)).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    expect(harness.llm.violations).toEqual([]);
    const last = harness.llm.requests.at(-1)!;
    expect(firstUser(last)).toBe('go slow');
    expect(last.body.messages!.find((message) => message.role === 'tool')).toMatchObject({ tool_call_id: 'task_slow' });
  });
});

describe('subagents below subagents (AGENTD_SUBAGENT_MAX_DEPTH=2)', () => {
  it('a subagent may start one more level; the nested events name their own task call, and the deepest level has no task tool', async () => {
    harness = await startAgentHarness([{ toolCalls: [{ id: 'task_outer', name: 'task', arguments: { description: 'outer', prompt: 'OUTER-JOB' } }] }, { text: 'all done' }], { env: { AGENTD_SUBAGENT_MAX_DEPTH: '2' } });
    harness.llm.route({ when: 'OUTER-JOB', script: [{ toolCalls: [{ id: 'task_inner', name: 'task', arguments: { description: 'inner', prompt: 'INNER-JOB' } }] }, { text: 'outer heard: inner says hi' }] });
    harness.llm.route({ when: 'INNER-JOB', script: [{ text: 'inner says hi' }] });
    const id = await harness.createConversation();
    await harness.post(`/conversations/${id}/messages`, { content: 'go deep' });
    await harness.waitForStatus(id, ['idle']);
    const outer = harness.llm.requests.find((request) => firstUser(request).includes('OUTER-JOB'))!;
    const inner = harness.llm.requests.find((request) => firstUser(request).includes('INNER-JOB'))!;
    expect(toolNames(outer)).toContain('task');
    expect(toolNames(inner)).not.toContain('task');
    const events = await harness.events(id);
    expect(events.find((event) => event.kind === 'action' && event.tool_call_id === 'task_inner')).toMatchObject({ parent_tool_call_id: 'task_outer' });
    expect(events.find((event) => event.kind === 'message' && event.content === 'inner says hi')).toMatchObject({ parent_tool_call_id: 'task_inner', agent: 'general-purpose' });
    expect(events.find((event) => event.kind === 'observation' && event.tool_call_id === 'task_inner')).toMatchObject({ parent_tool_call_id: 'task_outer', content: 'inner says hi' });
    expect(events.find((event) => event.kind === 'observation' && event.tool_call_id === 'task_outer')).toMatchObject({ content: 'outer heard: inner says hi' });
    expect(harness.llm.violations).toEqual([]);
  });
});

describe('the SDK with subagents', () => {
  it("client.run's final_text is the main agent's, never a subagent's reply, and client.skills.list reads the catalog", async () => {
    const { AgentdClient } = await import('../../src/client/index.js');
    // The main agent's next request fails: the run ends without an answer of its own.
    harness = await startAgentHarness([{ toolCalls: [{ id: 'task_sdk', name: 'task', arguments: { description: 'sdk', prompt: 'SDK-JOB' } }] }, { status: 400 }]);
    harness.llm.route({ when: 'SDK-JOB', script: [{ text: 'subagent answer' }] });
    const client = new AgentdClient({ url: harness.server.url, apiKey: harness.server.auth.authorization!.replace('Bearer ', '') });
    const result = await client.run({ prompt: 'go', llm: { model: 'fake-model', base_url: harness.llm.url, api_key: 'k' } });
    expect(result.status).toBe('error');
    expect(result.final_text).toBeNull();
    expect(result.events.some((event) => event.kind === 'message' && event.parent_tool_call_id === 'task_sdk' && event.content === 'subagent answer')).toBe(true);
    const catalog = await client.skills.list(result.conversation_id);
    expect(catalog.agents.map((agent) => agent.name)).toEqual(['general-purpose']);
  });
});
