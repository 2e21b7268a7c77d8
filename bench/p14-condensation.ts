import type { AgentEvent } from '../src/core/schemas/event.js';
import { fakeSummary, startFakeLlm, type FakeLlm, type FakeTurn } from '../test/fake-llm/fake-llm-server.js';
import { startServer, type TestServer } from '../test/support/agentd.js';
import type { Benchmark } from './support/benchmark.js';
import { EventTap } from './support/instrumented.js';
import { fmt, ratio, summarize } from './support/stats.js';

/** Events in the history condensed: each glob step records an action, an observation and a usage event. */
const TARGET_EVENTS = 500;
const SUMMARY_CHARS = 1200;

/**
 * P14: what a condensation costs. Conversations on one server each get a history of about 500
 * events (agent steps calling `glob`, the fake LLM answering at once); then, on each, one plain
 * turn (a message answered in text: the baseline) and POST /condense until its `condensation`
 * event is in the log (planning the cut, PreCompact hooks (none here), the summary request to the
 * fake LLM, the event and the history fold). Both include one fake-LLM round trip.
 */
export const p14Condensation: Benchmark = {
  id: 'P14',
  title: 'condensation',
  measures: 'ms from POST /condense to the `condensation` event on a conversation of about 500 events (the summary from the fake LLM at 0 ms), and the prompt before and after',
  async run({ quick }) {
    const conversations = quick ? 3 : 8;
    // A summary of about 300 tokens, streamed in pieces of 64 characters (as a real model's tokens come in groups).
    const fake = await startFakeLlm({ summarizer: (request) => ({ text: fakeSummary(request.body).slice(0, SUMMARY_CHARS) }), textChunkSize: 64, whenExhausted: { text: 'done' } });
    const tap = new EventTap();
    const server = await startServer({ overrides: { readers: [tap] } });
    try {
      const plain: number[] = [];
      const condensing: number[] = [];
      const sizes: { events: number; before: number; after: number; summaryChars: number; requestChars: number }[] = [];
      for (let i = 0; i < conversations; i++) {
        const conversation = await populated(server, tap, fake);
        plain.push(await conversation.plainTurn());
        const condensed = await conversation.condense();
        condensing.push(condensed.ms);
        sizes.push({ events: conversation.events, before: condensed.event.tokens_before, after: condensed.event.tokens_after, summaryChars: condensed.event.summary.length, requestChars: JSON.stringify(fake.summaryRequests.at(-1)!.body.messages).length });
      }
      // The first of each is a warm-up (JIT, the shell of the first conversation): left out.
      const turn = summarize(plain.slice(1));
      const condense = summarize(condensing.slice(1));
      const last = sizes.at(-1)!;
      return {
        sizes: `${conversations} conversations of ${last.events} events each (the first a warm-up, left out); fake LLM at 0 ms`,
        tables: [
          {
            caption: `On a conversation of ${last.events} events`,
            columns: ['', 'ms p50', 'ms mean', 'ms max', 'vs baseline (mean)'],
            rows: [
              ['one plain turn: message → answer → idle (baseline)', fmt(turn.p50), fmt(turn.mean), fmt(turn.max), '×1'],
              ['POST /condense → `condensation` event', fmt(condense.p50), fmt(condense.mean), fmt(condense.max), ratio(condense.mean, turn.mean)],
            ],
          },
          {
            caption: 'What was condensed (the last conversation)',
            columns: ['prompt tokens before', 'after (estimated)', 'summary request (characters)', 'summary (characters)'],
            rows: [[String(last.before), String(last.after), String(last.requestChars), String(last.summaryChars)]],
          },
        ],
        notes: [
          `Condensing ${last.events} events takes ${fmt(condense.mean)} ms against ${fmt(turn.mean)} ms for a plain turn (${ratio(condense.mean, turn.mean)}), with the summary from a fake LLM answering at once: with a real model the summary request's own time (seconds) dominates.`,
          `The prompt went from ${last.before} to about ${last.after} tokens.`,
        ],
      };
    } finally {
      await server.close();
      await fake.close();
    }
  },
};

/** A conversation with a history of about TARGET_EVENTS events, and the two operations measured on it. */
async function populated(server: TestServer, tap: EventTap, fake: FakeLlm) {
  const headers = { ...server.auth, 'content-type': 'application/json' };
  const created = await fetch(`${server.url}/conversations`, { method: 'POST', headers, body: JSON.stringify({ llm: { model: 'fake-model', base_url: fake.url, api_key: 'sk-bench' }, tools: ['glob'], max_iterations_per_run: 100_000, condenser: null }) });
  if (created.status !== 201) throw new Error(`POST /conversations: ${created.status} ${await created.text()}`);
  const { id } = (await created.json()) as { id: string };
  const until = (predicate: (event: AgentEvent) => boolean) => {
    let resolve!: (event: AgentEvent) => void;
    const seen = new Promise<AgentEvent>((done) => (resolve = done));
    const unsubscribe = tap.on(({ event }) => {
      if (event.conversation_id === id && predicate(event)) resolve(event);
    });
    return seen.finally(unsubscribe);
  };
  const send = async (content: string) => {
    const ended = until((event) => event.kind === 'state_update' && event.status !== 'running');
    const posted = await fetch(`${server.url}/conversations/${id}/messages`, { method: 'POST', headers, body: JSON.stringify({ content }) });
    if (posted.status !== 202) throw new Error(`POST /messages: ${posted.status} ${await posted.text()}`);
    const end = await ended;
    if (end.kind !== 'state_update' || end.status !== 'idle') throw new Error('the run did not end idle');
  };
  // Arguments differ at each step, or the run would end as stuck (the same call, the same result).
  const steps = Math.ceil(TARGET_EVENTS / 3);
  const script: FakeTurn[] = Array.from({ length: steps }, (_, n) => ({ toolCalls: [{ name: 'glob', arguments: { pattern: `src/**/none-${n}.ts` } }] }));
  fake.setScript([...script, { text: 'looked everywhere' }]);
  await send('Look for the files.');
  const count = (await (await fetch(`${server.url}/conversations/${id}/events/count`, { headers })).json()) as { count: number };
  return {
    events: count.count,
    async plainTurn(): Promise<number> {
      fake.setScript([{ text: 'an answer' }]);
      const started = performance.now();
      await send('A question.');
      return performance.now() - started;
    },
    async condense(): Promise<{ ms: number; event: Extract<AgentEvent, { kind: 'condensation' }> }> {
      const condensed = until((event) => event.kind === 'condensation');
      const started = performance.now();
      const response = await fetch(`${server.url}/conversations/${id}/condense`, { method: 'POST', headers, body: '{}' });
      if (response.status !== 202) throw new Error(`POST /condense: ${response.status} ${await response.text()}`);
      const event = await condensed;
      const ms = performance.now() - started;
      if (event.kind !== 'condensation') throw new Error('not a condensation');
      return { ms, event };
    },
  };
}
