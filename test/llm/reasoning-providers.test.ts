/**
 * Issue 72: reasoning models over chat completions, against the fake LLM replaying real streams
 * recorded from DeepSeek, xAI, Groq and Mistral (test/fake-llm/recordings/, each citing its
 * source). Each run goes through the real server: the recorded answer makes a tool call (agentd's
 * `bash` in place of the recording's `weather`), the call runs, the model answers.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { replay } from '../fake-llm/recordings.js';
import type { FakeTurn } from '../fake-llm/fake-llm-server.js';
import type { ProviderName } from '../fake-llm/provider-profiles.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';

let harness: AgentHarness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const BASH = { name: 'bash', arguments: { command: 'echo reasoned', timeout_s: 20 } };

async function run(provider: ProviderName, script: FakeTurn[], llm: Record<string, unknown>) {
  harness = await startAgentHarness(script, { fake: { provider } });
  const id = await harness.createConversation({ llm: { api_key: 'sk-provider-key', base_url: harness.llm.url, ...llm }, initial_message: 'check the weather' });
  const done = await harness.waitForStatus(id, ['idle', 'error', 'finished', 'stuck', 'paused']);
  return { id, done, events: await harness.events(id), fake: harness.llm };
}

const ofKind = (events: any[], kind: string) => events.filter((event) => event.kind === kind);
/** The assistant message of the second request (the one with the call). */
const replayedAssistant = (fake: { requests: { body: { messages?: any[] } }[] }) => fake.requests[1]!.body.messages!.find((message) => message.role === 'assistant');

describe('DeepSeek thinking mode (recorded stream)', () => {
  const script = (): FakeTurn[] => [replay('deepseek-tool-call', { toolCall: BASH }), { text: 'It is sunny.', reasoning: 'The tool answered.' }];

  it('finishes a tool loop: reasoning_content goes back on the assistant message', async () => {
    const { done, events, fake } = await run('deepseek', script(), { model: 'deepseek-v4-flash' });
    expect(fake.violations).toEqual([]);
    expect(done.status).toBe('idle');
    expect(ofKind(events, 'observation')[0]).toMatchObject({ is_error: false, content: expect.stringContaining('reasoned') });
    const reasoning = ofKind(events, 'reasoning');
    expect(reasoning.map((event) => event.content)).toEqual(['The user asks about the weather.', 'The tool answered.']);
    // The reasoning comes before the action of the same response, and names it.
    const action = ofKind(events, 'action')[0];
    expect(reasoning[0].seq).toBeLessThan(action.seq);
    expect(reasoning[0].llm_response_id).toBe(action.llm_response_id);
    expect(replayedAssistant(fake)).toMatchObject({ reasoning_content: 'The user asks about the weather.', tool_calls: [{ id: 'call_00_IhCAliIHtM9gKpgfqbBV9873' }] });
    // DeepSeek's usage: cached tokens as prompt_cache_hit_tokens too, reasoning inside completion_tokens.
    expect(ofKind(events, 'usage')[0]).toMatchObject({ prompt_tokens: 374, completion_tokens: 61, cached_tokens: 256, reasoning_tokens: 17 });
  });

  it('send_back never: DeepSeek refuses the second request with its own words', async () => {
    const { done, events, fake } = await run('deepseek', script(), { model: 'deepseek-v4-flash', reasoning: { send_back: 'never' } });
    expect(done.status).toBe('error');
    expect(replayedAssistant(fake).reasoning_content).toBeUndefined();
    expect(ofKind(events, 'agent_error')[0].message).toContain('The reasoning_content in the thinking mode must be passed back to the API.');
  });

});

describe('xAI (recorded stream): reasoning tokens outside completion_tokens', () => {
  it('counts them in completion_tokens and keeps the reasoning out of the next request', async () => {
    const { done, events, fake } = await run('xai', [replay('xai-tool-call', { toolCall: BASH }), { text: 'Sunny.' }], { model: 'grok-3-mini' });
    expect(fake.violations).toEqual([]);
    expect(done.status).toBe('idle');
    expect(ofKind(events, 'reasoning')[0].content).toBe('First, the user is');
    // total_tokens 513 = 291 prompt + 26 completion + 196 reasoning.
    expect(ofKind(events, 'usage')[0]).toMatchObject({ prompt_tokens: 291, completion_tokens: 222, reasoning_tokens: 196, cached_tokens: 290 });
    expect(replayedAssistant(fake).reasoning_content).toBeUndefined();
  });

  it('show false: no reasoning text is recorded', async () => {
    const { done, events } = await run('xai', [replay('xai-tool-call', { toolCall: BASH }), { text: 'Sunny.' }], { model: 'grok-3-mini', reasoning: { show: false } });
    expect(done.status).toBe('idle');
    expect(ofKind(events, 'reasoning')).toEqual([]);
    expect(JSON.stringify(events)).not.toContain('First, the user is');
  });
});

describe('Groq (recorded stream): reasoning in `reasoning`', () => {
  it('reads it, and never sends a field Groq rejects', async () => {
    const { done, events, fake } = await run('groq', [{ toolCalls: [BASH], reasoning: 'I will run it.' }, replay('groq-reasoning')], { model: 'qwen/qwen3-32b' });
    expect(fake.violations).toEqual([]);
    expect(done.status).toBe('idle');
    expect(ofKind(events, 'reasoning').map((event) => event.content)).toEqual(['I will run it.', 'Okay, let me try to figure']);
    expect(ofKind(events, 'message').at(-1)).toMatchObject({ source: 'agent', content: '{3}$' });
    expect(ofKind(events, 'usage')[1]).toMatchObject({ prompt_tokens: 17, completion_tokens: 1107, reasoning_tokens: 963 });
  });

  it('send_back always: Groq rejects reasoning_content (the reason auto drops it)', async () => {
    const { done, fake } = await run('groq', [{ toolCalls: [BASH], reasoning: 'I will run it.' }, replay('groq-reasoning')], { model: 'qwen/qwen3-32b', reasoning: { send_back: 'always' } });
    expect(done.status).toBe('error');
    expect(fake.violations.join()).toContain("property 'reasoning_content' is unsupported");
  });
});

describe('Qwen on DashScope (recorded stream)', () => {
  it('reads reasoning_content and its usage (reasoning inside completion_tokens: total = prompt + completion)', async () => {
    const { done, events, fake } = await run('dashscope', [{ toolCalls: [BASH], reasoning: 'Run it first.' }, replay('dashscope-reasoning')], { model: 'qwen3-max', extra_body: { enable_thinking: true } });
    expect(fake.violations).toEqual([]);
    expect(done.status).toBe('idle');
    expect(ofKind(events, 'reasoning').map((event) => event.content)).toEqual(['Run it first.', 'We are asked:']);
    expect(ofKind(events, 'message').at(-1)).toMatchObject({ source: 'agent', content: ' returns `3`).  \n\n**Answer: 3**' });
    expect(ofKind(events, 'usage')[1]).toMatchObject({ prompt_tokens: 24, completion_tokens: 1355, reasoning_tokens: 1084 });
    expect(replayedAssistant(fake).reasoning_content).toBeUndefined();
  });
});

describe('Mistral magistral (recorded streams): content as arrays of parts', () => {
  it('joins text parts, takes thinking parts as reasoning, and streams strings only', async () => {
    const { done, events, fake } = await run('mistral', [replay('mistral-tool-call', { toolCall: BASH }), replay('mistral-reasoning')], { model: 'magistral-medium-2507' });
    expect(fake.violations).toEqual([]);
    expect(done.status).toBe('idle');
    expect(ofKind(events, 'message').at(-1)).toMatchObject({ source: 'agent', content: '2 + 2 = 4' });
    expect(ofKind(events, 'reasoning')[0].content).toBe('The user is asking for 2+2. This is basic arithmetic. 2+2=4.');
    expect(JSON.stringify(events)).not.toContain('[object Object]');
  });
});

describe('usage by convention', () => {
  it('an answer without usage is recorded as unknown (null), not as a free call', async () => {
    const { done, events } = await run('vllm', [{ text: 'No usage here.', usage: null }], { model: 'Qwen/Qwen3-8B' });
    expect(done.status).toBe('idle');
    const [usage] = ofKind(events, 'usage');
    expect(usage).toMatchObject({ prompt_tokens: null, completion_tokens: null, cost: null });
    expect(usage.totals).toMatchObject({ prompt_tokens: 0, completion_tokens: 0 });
  });
});
