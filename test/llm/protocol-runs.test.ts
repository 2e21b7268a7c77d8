/**
 * Issue 72, part B, end to end: conversations whose `llm.api` is `responses` or `anthropic`
 * run through the real server against a fake speaking that protocol: a run with parallel tool
 * calls, a context overflow answered by condensation, a 429 and a 529 waited out, and reasoning
 * carried across three turns.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { FakeLlm, FakeTurn } from '../fake-llm/fake-llm-server.js';
import type { FakeProtocolTurn } from '../fake-llm/fake-protocol.js';
import { PROTOCOL_ERRORS } from '../fake-llm/protocol-errors.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';

let harness: AgentHarness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

type Api = 'responses' | 'anthropic';
const PROTOCOLS: Api[] = ['responses', 'anthropic'];

const LLM_OF: Record<Api, (fake: FakeLlm) => Record<string, unknown>> = {
  responses: (fake) => ({ model: 'gpt-5', api: 'responses', base_url: fake.url, api_key: 'sk-responses-key', reasoning: { effort: 'medium' } }),
  anthropic: (fake) => ({ model: 'claude-sonnet-4-5', api: 'anthropic', base_url: fake.origin, api_key: 'sk-ant-key', max_output_tokens: 8192, reasoning: { effort: 'low' } }),
};

const PARALLEL_CALLS: FakeTurn[] = [
  {
    text: 'Creating the file and counting at once.',
    toolCalls: [
      { name: 'file_editor', arguments: { command: 'create', path: 'notes.txt', file_text: 'from the model\n' } },
      { name: 'bash', arguments: { command: 'echo parallel-ok', timeout_s: 20 } },
    ],
  },
  { text: 'notes.txt is written.' },
];

const bash = (command: string): FakeTurn => ({ toolCalls: [{ name: 'bash', arguments: { command } }], usage: { prompt_tokens: 200, completion_tokens: 10 } });

/** The commands of the bash calls a request carries (as calls: a summary may quote them in its text). */
function commandsIn(body: any): string[] {
  const calls = body.input ? body.input.filter((item: any) => item.type === 'function_call').map((item: any) => item.arguments) : body.messages.flatMap((message: any) => message.content).filter((block: any) => block.type === 'tool_use').map((block: any) => JSON.stringify(block.input));
  return calls.map((args: string) => JSON.parse(args).command);
}

async function run(api: Api, script: FakeTurn[], body: Record<string, unknown> = {}) {
  harness = await startAgentHarness(script, { fake: { protocol: api, summarizer: true } });
  const id = await harness.createConversation({ llm: LLM_OF[api](harness.llm), initial_message: 'make notes.txt', ...body });
  const done = await harness.waitForStatus(id, ['idle', 'error', 'finished', 'stuck', 'paused']);
  const events = await harness.events(id);
  return { id, done, events, llm: harness.llm, agentRequests: harness.llm.requests.filter((request) => !harness!.llm.summaryRequests.includes(request)) };
}

for (const api of PROTOCOLS) {
  describe(`llm.api ${api}`, () => {
    it('runs a task with parallel tool calls to its answer', async () => {
      const { done, events, llm } = await run(api, PARALLEL_CALLS);
      expect(llm.violations).toEqual([]);
      expect(done.status, JSON.stringify(events.filter((event) => event.kind === 'agent_error'))).toBe('idle');
      expect(fs.readFileSync(path.join(done.workdir, 'notes.txt'), 'utf8')).toBe('from the model\n');
      const observations = events.filter((event) => event.kind === 'observation');
      expect(observations.map((event) => event.is_error)).toEqual([false, false]);
      expect(observations[1].content).toContain('parallel-ok');
      expect(events.filter((event) => event.kind === 'message' && event.source === 'agent').at(-1)).toMatchObject({ content: 'notes.txt is written.' });
      expect(llm.requests).toHaveLength(2);
      expect(done.usage.prompt_tokens).toBeGreaterThan(0);
      // Both results went back in the second request, as the protocol wants them.
      const second = llm.requests[1]!.body as any;
      if (api === 'responses') expect(second.input.filter((item: any) => item.type === 'function_call_output')).toHaveLength(2);
      else expect(second.messages.at(-1).content.filter((block: any) => block.type === 'tool_result')).toHaveLength(2);
    });

    it('a context overflow in its own words condenses the history and the turn goes on', async () => {
      const overflow = PROTOCOL_ERRORS[api].contextOverflow;
      const { done, events, llm, agentRequests } = await run(api, [bash('echo one'), bash('echo two'), bash('echo three'), overflow, { text: 'fits now' }], { condenser: { keep_last: 2 }, initial_message: 'go' });
      expect(done.status).toBe('idle');
      expect(events.some((event) => event.kind === 'agent_error')).toBe(false);
      expect(events.find((event) => event.kind === 'condensation')).toMatchObject({ trigger: 'context_exceeded' });
      expect(events.filter((event) => event.kind === 'message' && event.source === 'agent').at(-1)).toMatchObject({ content: 'fits now' });
      expect(llm.summaryRequests).toHaveLength(1);
      expect(JSON.stringify(agentRequests.at(-1)!.body)).toContain('SUMMARY of events');
      expect(commandsIn(agentRequests.at(-2)!.body)).toEqual(['echo one', 'echo two', 'echo three']);
      expect(commandsIn(agentRequests.at(-1)!.body)).toEqual(['echo three']);
      if (api === 'anthropic') {
        // The summary is the stable start of the history: a cache breakpoint.
        const summary = (agentRequests.at(-1)!.body as any).messages.flatMap((message: any) => message.content).find((block: any) => block.type === 'text' && block.text.includes('SUMMARY of events'));
        expect(summary.cache_control).toEqual({ type: 'ephemeral' });
      }
      expect(llm.violations).toEqual([]);
    });

    it(`waits out ${api === 'anthropic' ? 'a 529 overloaded and ' : 'a 500 and '}a 429 rate limit`, async () => {
      const busy = api === 'anthropic' ? PROTOCOL_ERRORS.anthropic.overloaded : PROTOCOL_ERRORS.responses.serverError;
      const { done, events, llm } = await run(api, [busy, PROTOCOL_ERRORS[api].rateLimited, ...PARALLEL_CALLS]);
      expect(done.status, JSON.stringify(events.filter((event) => event.kind === 'agent_error'))).toBe('idle');
      expect(llm.requests).toHaveLength(4);
      expect(fs.readFileSync(path.join(done.workdir, 'notes.txt'), 'utf8')).toBe('from the model\n');
      expect(llm.violations).toEqual([]);
    });
  });
}

describe('reasoning carried across three turns through the server', () => {
  const THREE_TURNS: FakeProtocolTurn[] = [
    { reasoning: 'Two independent commands: run them together.', toolCalls: [{ name: 'bash', arguments: { command: 'echo first' } }, { name: 'bash', arguments: { command: 'echo second' } }] },
    { reasoning: 'Both printed; now one more check.', text: 'Checking once more.', toolCalls: [{ name: 'bash', arguments: { command: 'echo third' } }] },
    { reasoning: 'Everything printed as expected.', text: 'All three commands ran.' },
  ];
  for (const api of PROTOCOLS) {
    it(api, async () => {
      const { done, events, llm } = await run(api, THREE_TURNS, { initial_message: 'run the commands' });
      expect(llm.violations).toEqual([]);
      expect(done.status).toBe('idle');
      expect(events.filter((event) => event.kind === 'reasoning').map((event) => event.content)).toEqual(THREE_TURNS.map((turn) => turn.reasoning));
      const third = llm.requests[2]!.body as any;
      const sentBack = api === 'responses' ? third.input.filter((item: any) => item.type === 'reasoning') : third.messages.flatMap((message: any) => message.content).filter((block: any) => block.type === 'thinking');
      // The fake checked each is exactly what it issued (violations); both earlier turns' are there.
      expect(sentBack).toHaveLength(2);
      expect(JSON.stringify(sentBack)).toContain(THREE_TURNS[0]!.reasoning!);
      expect(JSON.stringify(sentBack)).toContain(THREE_TURNS[1]!.reasoning!);
    });
  }
});
