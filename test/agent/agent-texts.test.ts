// What the agent is told and what it reports, in the words that fit the run: the stuck reason,
// a subagent's result without a reply, the step-budget warning, the subagent's prompt.
import { afterEach, describe, expect, it } from 'vitest';
import type { FakeStaticTurn } from '../fake-llm/fake-llm-server.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';

let harness: AgentHarness;
afterEach(async () => harness?.close());

const bash = (n: number) => ({ toolCalls: [{ name: 'bash', arguments: { command: `echo step-${n}` } }] });
const tooLong: FakeStaticTurn = { status: 400, body: { error: { message: 'prompt is too long', type: 'invalid_request_error', code: 'context_length_exceeded' } } };
const notes = (events: any[]) => events.filter((event) => event.kind === 'message' && event.source === 'system').map((event) => String(event.content));

describe('the texts of the loop', () => {
  it('a stuck run says what the agent did in the third person', async () => {
    const call = { toolCalls: [{ name: 'glob', arguments: { pattern: '*.none' } }] };
    harness = await startAgentHarness(Array.from({ length: 10 }, () => call));
    const id = await harness.createConversation({ initial_message: 'loop' });
    expect((await harness.waitForStatus(id, ['stuck', 'idle', 'error'])).status).toBe('stuck');
    const stuck = (await harness.events(id)).find((event) => event.kind === 'state_update' && event.status === 'stuck');
    expect(stuck.reason).toBe('The agent has made the same call with the same result 4 times in a row, and went on after being told so.');
  });

  it('the step-budget warning names `finish` only when the run can end with it', async () => {
    const script = [bash(1), bash(2), bash(3), bash(4), { text: 'summary' }];
    harness = await startAgentHarness([...script, ...script, ...script]);
    const warning = async (body: Record<string, unknown>, message: Record<string, unknown>) => {
      const id = await harness.createConversation({ max_iterations_per_run: 5, ...body });
      await harness.post(`/conversations/${id}/messages`, message);
      await harness.waitForStatus(id, ['idle', 'paused', 'error']);
      return notes(await harness.events(id)).find((note) => note.startsWith('You have used'))!;
    };
    expect(await warning({}, { content: 'work' })).toContain('Call `finish` if the task is done');
    const withoutFinish = await warning({ tools: ['bash'] }, { content: 'work' });
    expect(withoutFinish).toContain('If the task is done, reply with your final answer');
    expect(withoutFinish).not.toContain('finish`');
    const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] };
    const withSchema = await warning({}, { content: 'work', output_schema: schema });
    expect(withSchema).toContain('it must match their schema');
    expect(withSchema).not.toContain('`finish`');
  });
});

describe('subagents', () => {
  it('one that never answered reports no reply (not its own task), and its overflow error speaks of subagents', async () => {
    harness = await startAgentHarness([{ toolCalls: [{ id: 'task_x', name: 'task', arguments: { description: 'x', prompt: 'SUB-TASK: do the thing' } }] }, { text: 'parent done' }], { fake: { summarizer: true } });
    harness.llm.route({ when: 'SUB-TASK', script: [], whenExhausted: tooLong });
    const id = await harness.createConversation({ initial_message: 'delegate' });
    await harness.waitForStatus(id, ['idle', 'error']);
    const events = await harness.events(id);
    const result = events.find((event) => event.kind === 'observation' && event.tool_call_id === 'task_x');
    expect(result.is_error).toBe(true);
    expect(result.content).toMatch(/^The subagent failed: .*prompt is too long/);
    expect(result.content).not.toContain('Its last reply');
    expect(result.content).not.toContain('SUB-TASK');
    expect(result.content).toContain("a subagent's history is condensed with the conversation's condenser settings");
    expect(result.content).not.toContain('keep_first');
    // The general-purpose subagent is not told that the user may step in or that it may ask.
    const prompt = events.find((event) => event.kind === 'system_prompt' && event.parent_tool_call_id === 'task_x').content as string;
    expect(prompt).toContain('nobody can answer questions');
    expect(prompt).not.toContain('may step in');
    expect(prompt).not.toContain('ask in a plain reply');
    expect(prompt).not.toContain('`ask_user`');
  });
});
