// What the LLM receives from the history kept as wire texts is what a fresh fold of the stored log
// gives, shaped and encoded whole (the path before the texts were kept), at every request of a
// conversation that is released while idle, condensed, rewound and forked, and of conversations
// whose histories are dropped between their runs to stay within AGENTD_HISTORY_CACHE_MB.
import { afterEach, describe, expect, it } from 'vitest';
import { shapeChatRequest } from '../../src/adapters/llm/chat-request-shape.js';
import { AgentSession } from '../../src/core/agent/agent-session.js';
import type { EventLog } from '../../src/core/events/event-log.js';
import type { AgentEvent } from '../../src/core/schemas/event.js';
import type { RecordedRequest } from '../fake-llm/fake-llm-server.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';
import { processAlive } from '../support/processes.js';
import { fetchWithKey } from '../support/json-api.js';

let harness: AgentHarness;
afterEach(async () => harness?.close());

const bash = (command: string) => ({ toolCalls: [{ name: 'bash', arguments: { command } }] });

/** The messages a fresh session folds from the first `count` stored events, as the old path sent them. */
async function freshMessages(events: AgentEvent[], count: number): Promise<unknown> {
  const prefix = events.slice(0, count);
  const log = {
    read: async (_id: string, options: { cursorSeq?: number; limit?: number }) =>
      prefix.filter((event) => event.seq > (options.cursorSeq ?? 0)).slice(0, options.limit ?? 1000).map((event) => ({ event })),
  } as unknown as EventLog;
  const session = new AgentSession(events[0]!.conversation_id);
  await session.load(log);
  const body = shapeChatRequest({ settings: { model: 'fake-model' }, messages: session.history.snapshot(), tools: [], signal: new AbortController().signal }, { stream: true }).body;
  return JSON.parse(JSON.stringify(body.messages));
}

/** Each request matches a fold of some prefix of the log, the prefixes in order (a request is made between events). */
async function expectFreshFolds(requests: RecordedRequest[], events: AgentEvent[]): Promise<void> {
  expect(requests.length).toBeGreaterThan(0);
  let count = 1;
  for (const request of requests) {
    let matched = false;
    for (; count <= events.length && !matched; count++) matched = JSON.stringify(await freshMessages(events, count)) === JSON.stringify(request.body.messages);
    expect(matched, `request #${request.index} matches no fold of the log (messages: ${JSON.stringify(request.body.messages).slice(0, 400)}…)`).toBe(true);
    count -= 1;
  }
}

async function waitUntil(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('the history sent to the LLM', () => {
  it('is a fresh fold of the log at every request: runs with calls, an idle release, a condensation, a rewind, a fork', async () => {
    harness = await startAgentHarness(
      [
        bash('echo one > one.txt'),
        { toolCalls: [{ name: 'bash', arguments: { command: 'echo two' } }, { name: 'bash', arguments: { command: 'echo "quoted \\" é 漢"' } }] },
        { text: 'first done' },
        bash('cat one.txt'),
        { text: 'second done' },
        bash('echo three'),
        { text: 'third done' },
        bash('echo four'),
        { text: 'fourth done' },
        bash('echo in the fork'),
        { text: 'fork done' },
      ],
      { env: { AGENTD_IDLE_TIMEOUT_S: '1' }, fake: { summarizer: true } },
    );
    const agentRequests = () => harness.llm.requests.filter((request) => !harness.llm.summaryRequests.includes(request));
    const id = await harness.createConversation({ initial_message: 'start', condenser: { keep_first: 1, keep_last: 2 } });
    await harness.waitForStatus(id, ['idle']);
    const workdir = (await harness.get(`/conversations/${id}`)).body.workdir as string;

    // Idle release: the shell (whose sandbox names the workdir) goes, and the folded history with it.
    await waitUntil('the idle release', () => !processAlive(workdir));
    expect((await harness.post(`/conversations/${id}/messages`, { content: 'again' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);

    const condensed = await harness.post(`/conversations/${id}/condense`, {});
    expect(condensed.status).toBe(202);
    await waitUntil('the condensation', async () => (await harness.events(id)).some((event) => event.kind === 'condensation'));
    expect((await harness.post(`/conversations/${id}/messages`, { content: 'after the summary' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);

    const checkpoints = (await harness.get(`/conversations/${id}/checkpoints`)).body.items as { id: string; trigger: string }[];
    const rewound = await harness.post(`/conversations/${id}/rewind`, { checkpoint_id: checkpoints.filter((checkpoint) => checkpoint.trigger === 'tool').at(-1)!.id });
    expect(rewound.status).toBe(200);
    expect((await harness.post(`/conversations/${id}/messages`, { content: 'after the rewind' })).status).toBe(202);
    await harness.waitForStatus(id, ['idle']);
    const parentRequests = agentRequests();
    const parentEvents = (await harness.events(id)) as AgentEvent[];

    const forked = await harness.post(`/conversations/${id}/fork`, {});
    expect(forked.status).toBe(201);
    const forkId = forked.body.id as string;
    expect((await harness.post(`/conversations/${forkId}/messages`, { content: 'in the fork' })).status).toBe(202);
    await harness.waitForStatus(forkId, ['idle']);
    const forkRequests = agentRequests().slice(parentRequests.length);

    expect(parentRequests).toHaveLength(9);
    expect(forkRequests).toHaveLength(2);
    await expectFreshFolds(parentRequests, parentEvents);
    await expectFreshFolds(forkRequests, (await harness.events(forkId)) as AgentEvent[]);
    // The condensation and the rewind did change what was sent.
    expect(JSON.stringify(parentRequests.at(-3)!.body.messages)).toContain('first done');
    expect(JSON.stringify(parentRequests.at(-1)!.body.messages)).not.toContain('"echo three"');
    expect(harness.llm.violations).toEqual([]);
  });

  it('is a fresh fold of the log when the history was dropped between runs to stay within AGENTD_HISTORY_CACHE_MB', async () => {
    harness = await startAgentHarness(
      [
        bash('echo a1 > a.txt'),
        { text: 'A first done' },
        bash('echo b1'),
        { text: 'B first done' },
        { toolCalls: [{ name: 'bash', arguments: { command: 'echo a2' } }, { name: 'bash', arguments: { command: 'echo "é 漢"' } }] },
        { text: 'A second done' },
        { text: 'B second done' },
        bash('echo a3'),
        { text: 'A third done' },
        { text: 'B third done' },
        { text: 'A after the summary' },
        { text: 'B fourth done' },
        { text: 'A after the rewind' },
      ],
      // 0: no history is kept but the one in use; each conversation's run drops the other's.
      { env: { AGENTD_HISTORY_CACHE_MB: '0' }, fake: { summarizer: true } },
    );
    const agentRequests = () => harness.llm.requests.filter((request) => !harness.llm.summaryRequests.includes(request));
    const requestsOf = new Map<string, RecordedRequest[]>();
    /** Sends a message (or starts with one) and waits for the run's end: the requests it made are the conversation's. */
    const turn = async (id: string | null, content: string) => {
      const before = agentRequests().length;
      if (id === null) id = await harness.createConversation({ initial_message: content, condenser: { keep_first: 1, keep_last: 2 } });
      else expect((await harness.post(`/conversations/${id}/messages`, { content })).status).toBe(202);
      await harness.waitForStatus(id, ['idle']);
      requestsOf.set(id, [...(requestsOf.get(id) ?? []), ...agentRequests().slice(before)]);
      return id;
    };
    const released = async () => {
      const text = await (await fetchWithKey(harness.server, '/metrics')).text();
      return Number(/^agentd_history_cache_released_total (\d+)/m.exec(text)?.[1]);
    };

    const a = await turn(null, 'start A');
    const b = await turn(null, 'start B');
    expect(await released()).toBe(1);
    await turn(a, 'A again');
    await turn(b, 'B again');
    await turn(a, 'A once more');
    // A condensation of a history that was dropped, then dropped again before the next run.
    expect((await harness.post(`/conversations/${a}/condense`, {})).status).toBe(202);
    await waitUntil('the condensation', async () => (await harness.events(a)).some((event) => event.kind === 'condensation'));
    await turn(b, 'B meanwhile');
    await turn(a, 'A after the summary');
    // A rewind of a dropped history.
    const checkpoints = (await harness.get(`/conversations/${a}/checkpoints`)).body.items as { id: string; trigger: string }[];
    expect((await harness.post(`/conversations/${a}/rewind`, { checkpoint_id: checkpoints.filter((checkpoint) => checkpoint.trigger === 'tool').at(-1)!.id })).status).toBe(200);
    await turn(b, 'B after the rewind of A');
    await turn(a, 'A after the rewind');
    expect(await released()).toBeGreaterThanOrEqual(8);

    expect(requestsOf.get(a)).toHaveLength(8);
    expect(requestsOf.get(b)).toHaveLength(5);
    await expectFreshFolds(requestsOf.get(a)!, (await harness.events(a)) as AgentEvent[]);
    await expectFreshFolds(requestsOf.get(b)!, (await harness.events(b)) as AgentEvent[]);
    // The condensation and the rewind did change what was sent.
    expect(JSON.stringify(requestsOf.get(a)!.at(-2)!.body.messages)).toContain('were condensed into the summary below');
    expect(JSON.stringify(requestsOf.get(a)!.at(-2)!.body.messages)).toContain('echo a3');
    // The rewind went back to before the last call, and before the condensation.
    expect(JSON.stringify(requestsOf.get(a)!.at(-1)!.body.messages)).not.toContain('echo a3');
    expect(JSON.stringify(requestsOf.get(a)!.at(-1)!.body.messages)).not.toContain('were condensed into the summary below');
    expect(harness.llm.violations).toEqual([]);
  });
});
