import { fakeSummary, startFakeLlm } from '../test/fake-llm/fake-llm-server.js';
import { startServer } from '../test/support/agentd.js';
import { longScript } from '../test/support/long-conversation.js';
import type { Benchmark } from './support/benchmark.js';
import { fmt, ratio, summarize } from './support/stats.js';

const THRESHOLD = 30_000;
const SUMMARY_CHARS = 1200;

/** A request's size as the fake LLM estimates it: the characters of its messages and tools over 4. */
const tokensOf = (body: { messages?: unknown; tools?: unknown }) => Math.ceil(JSON.stringify([body.messages ?? [], body.tools ?? []]).length / 4);

/**
 * P21: tokens sent per turn over a long scripted conversation (a task list, then bash calls whose
 * outputs have random, seeded sizes: the script of test/agent/condensation-long.test.ts), with
 * condensation at 30,000 tokens, against a naive agent that sends the full history every turn
 * (the same messages, never condensed: computed from the log). Summary requests count for agentd.
 */
export const p21CondensationTokens: Benchmark = {
  id: 'P21',
  title: 'tokens per turn with condensation',
  measures: 'prompt tokens sent per turn over a 200-turn scripted conversation with condensation at 30,000 tokens, against a naive full-history agent, and the number of condensations',
  async run({ quick }) {
    const turns = quick ? 100 : 200;
    const fake = await startFakeLlm({ script: longScript({ seed: 73, turns }), summarizer: (request) => ({ text: fakeSummary(request.body).slice(0, SUMMARY_CHARS) }) });
    const server = await startServer();
    try {
      const headers = { ...server.auth, 'content-type': 'application/json' };
      const body = { llm: { model: 'fake-model', base_url: fake.url, api_key: 'sk-bench' }, condenser: { max_tokens: THRESHOLD, keep_first: 0, keep_last: 50 }, max_iterations_per_run: 1000, initial_message: 'Collect the numbers step by step. Requirement: never modify LEGACY.txt.' };
      const created = await fetch(`${server.url}/conversations`, { method: 'POST', headers, body: JSON.stringify(body) });
      if (created.status !== 201) throw new Error(`POST /conversations: ${created.status} ${await created.text()}`);
      const { id } = (await created.json()) as { id: string };
      for (;;) {
        const state = (await (await fetch(`${server.url}/conversations/${id}`, { headers })).json()) as { status: string };
        if (state.status === 'idle') break;
        if (state.status !== 'running') throw new Error(`the run ended ${state.status}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const events = ((await (await fetch(`${server.url}/conversations/${id}/events?limit=1000`, { headers })).json()) as { items: any[] }).items;
      const agent = fake.requests.filter((request) => !fake.summaryRequests.includes(request));
      const sent = agent.map((request) => tokensOf(request.body));
      const summaries = fake.summaryRequests.map((request) => tokensOf(request.body));
      // The naive agent's request at each turn: the first request, plus every call and result so far, as they are sent.
      const first = sent[0]!;
      const naive: number[] = [first];
      const actions = events.filter((event) => event.kind === 'action');
      let grown = first;
      for (const action of actions) {
        const result = events.find((event) => event.kind === 'observation' && event.tool_call_id === action.tool_call_id);
        const call = { role: 'assistant', content: null, tool_calls: [{ id: action.tool_call_id, type: 'function', function: { name: action.tool_name, arguments: JSON.stringify(action.arguments) } }] };
        grown += Math.ceil(JSON.stringify([call, { role: 'tool', tool_call_id: action.tool_call_id, content: result?.content ?? '' }]).length / 4);
        naive.push(grown);
      }
      const condensations = events.filter((event) => event.kind === 'condensation').length;
      const ours = summarize(sent);
      const theirs = summarize(naive.slice(0, sent.length));
      const total = sent.reduce((sum, n) => sum + n, 0) + summaries.reduce((sum, n) => sum + n, 0);
      const naiveTotal = naive.slice(0, sent.length).reduce((sum, n) => sum + n, 0);
      const window = THRESHOLD / 0.75;
      return {
        sizes: `${turns} turns (bash outputs of 100-12,000 characters, seed 73); condensation at ${THRESHOLD} tokens (a ${window}-token window); fake LLM at 0 ms`,
        tables: [
          {
            caption: 'Prompt tokens per turn (characters of the request / 4)',
            columns: ['', 'agentd', 'naive full history', 'agentd vs naive'],
            rows: [
              ['per turn, mean', fmt(ours.mean), fmt(theirs.mean), ratio(ours.mean, theirs.mean)],
              ['per turn, p50', fmt(ours.p50), fmt(theirs.p50), ratio(ours.p50, theirs.p50)],
              ['per turn, max', fmt(ours.max), fmt(theirs.max), ratio(ours.max, theirs.max)],
              ['all turns (agentd: with its summary requests)', fmt(total), fmt(naiveTotal), ratio(total, naiveTotal)],
            ],
          },
          {
            caption: 'Condensations',
            columns: ['condensations', 'turns per condensation', 'summary requests, tokens each (mean)', `naive turns over the ${window}-token window`],
            rows: [[String(condensations), fmt(turns / Math.max(condensations, 1)), fmt(summarize(summaries.length ? summaries : [0]).mean), String(naive.filter((n) => n > window).length)]],
          },
        ],
        notes: [
          `agentd sent ${ratio(total, naiveTotal)} the tokens of a naive full-history agent over ${turns} turns (summary requests included), its largest request ${fmt(ours.max)} tokens against ${fmt(theirs.max)}, with ${condensations} condensations.`,
        ],
      };
    } finally {
      await server.close();
      await fake.close();
    }
  },
};
