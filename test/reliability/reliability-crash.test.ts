/**
 * R1 crash: a spawned server (dist/cli.js) runs agents (the fake LLM asks for bash commands, file
 * edits, several calls per answer, slowly streamed text), delivers webhooks, creates and deletes
 * conversations, and is killed with SIGKILL at random moments, then restarted on the same data
 * dir. After every restart: each event the API returned before the kill is there byte for byte,
 * seqs are gapless and unique, every conversation loads (confirmed creations and deletions hold)
 * and none is left running, every action has its observation, the next LLM request of each
 * resumed run is a valid history (every tool call answered), and no process of the killed server
 * lives on. Half way, the webhook receiver goes down; once it is back after the last restart, it
 * gets every event of every conversation, in order, with valid signatures.
 * `AGENTD_HEAVY_TESTS=1`: 20 kills instead of 7.
 */
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeLlm, type FakeLlm, type FakeStaticTurn, type RecordedRequest } from '../fake-llm/fake-llm-server.js';
import { freePort, spawnServer, tempDir, type SpawnedServer } from '../support/agentd.js';
import { allConversationIds, allEvents, apiClient, canonicalJson, eventProblems, expectedSignature, processesUsing, scaled, sleep, until, type Api } from '../support/reliability.js';
import { WebhookReceiver, type ReceivedWebhook } from '../support/webhook-receiver.js';

const KILLS = scaled(7, 20);
const HOOK_SECRET = 'crash-test signing secret';

let llm: FakeLlm;
let receiver: WebhookReceiver | null = null;
let receiverPort: number;
/** Every webhook request received, by any receiver instance. */
const received: ReceivedWebhook[] = [];
let dataDir: string;
let server: SpawnedServer | null = null;
let api: Api;
const outputs: string[] = [];
/** Per conversation: every event the API returned, by seq, as the JSON text it was returned as. */
const acknowledged = new Map<string, Map<number, string>>();
const models = new Map<string, string>();

/** The fake LLM never ends a run: each answer asks for more work, varied so nothing looks stuck. */
function nextTurn(request: RecordedRequest): FakeStaticTurn {
  const step = (request.body.messages ?? []).filter((message) => message.role === 'assistant').length;
  switch (step % 5) {
    case 0:
      return { toolCalls: [{ name: 'bash', arguments: { command: `sleep 0.2; echo step-${step}` } }] };
    case 1:
      return { text: 'Writing a note.', toolCalls: [{ name: 'file_editor', arguments: { command: 'create', path: `notes/n${step % 4}.txt`, file_text: `step ${step}\n` } }] };
    case 2:
      return { toolCalls: [{ name: 'bash', arguments: { command: `printf 'line %s\\n' ${step} >> log.txt` } }, { name: 'file_editor', arguments: { command: 'view', path: 'log.txt' } }] };
    case 3:
      return { text: `Thinking about step ${step}. `.repeat(8), chunkDelayMs: 4, toolCalls: [{ name: 'bash', arguments: { command: `sleep 0.1; wc -l log.txt; echo ${step}` } }] };
    default:
      return { toolCalls: [{ name: 'grep', arguments: { pattern: `step ${step - 4}` } }] };
  }
}

async function openReceiver(): Promise<void> {
  receiver = await WebhookReceiver.start({ port: receiverPort });
  receiver.reply = (_n, request) => {
    received.push(request);
    return 200;
  };
}

async function spawn(): Promise<void> {
  server = await spawnServer({
    dataDir,
    env: { AGENTD_WEBHOOK_RETRY_BASE_MS: '20', AGENTD_WEBHOOK_RETRY_MAX_MS: '200', AGENTD_WEBHOOK_TIMEOUT_S: '2' },
  });
  api = apiClient(server.url);
}

async function kill(): Promise<void> {
  const dying = server!;
  server = null;
  dying.child.kill('SIGKILL');
  await dying.exited;
  outputs.push(dying.output());
}

function acknowledge(conversationId: string, events: Array<{ seq: number }>): void {
  const known = acknowledged.get(conversationId)!;
  for (const event of events) known.set(event.seq, JSON.stringify(event));
}

async function createConversation(index: number): Promise<void> {
  const model = `fake-${index}`;
  const created = await api.post('/conversations', { title: `crash ${index}`, llm: { model, base_url: llm.url, api_key: 'k' }, max_iterations_per_run: 100_000, initial_message: 'Work until stopped.', run: false });
  expect(created.status, created.text).toBe(201);
  const id = created.json().id as string;
  acknowledged.set(id, new Map());
  models.set(id, model);
  const callback = await api.post(`/conversations/${id}/callbacks`, { url: `http://127.0.0.1:${receiverPort}/hook`, secret: HOOK_SECRET });
  expect(callback.status, callback.text).toBe(201);
}

/** Polls every conversation's events, remembering what the API returned, until `stop()` (or the server is gone). */
function pollEvents(): { stop(): Promise<void> } {
  let stopped = false;
  const poll = async (id: string) => {
    while (!stopped) {
      const after = Math.max(0, ...acknowledged.get(id)!.keys());
      try {
        const page = await api.get(`/conversations/${id}/events?after_seq=${after}&limit=1000`);
        if (page.status === 200) acknowledge(id, page.json().items);
      } catch {
        return; // the server is gone
      }
      await sleep(25);
    }
  };
  const polling = Promise.all([...acknowledged.keys()].map(poll));
  return {
    async stop() {
      stopped = true;
      await polling;
    },
  };
}

/** How many action events the API has returned so far, in all conversations. */
function actionsAcknowledged(): number {
  let count = 0;
  for (const known of acknowledged.values()) for (const text of known.values()) if (text.includes('"kind":"action"')) count++;
  return count;
}

/** Conversations created and deleted around the kills: confirmed creations, deletions asked for and confirmed. */
const churned = { created: new Set<string>(), deleting: new Set<string>(), deleted: new Set<string>() };

/** Creates conversations and deletes every other one, until `stop()` (or the server is gone). */
function churn(): { stop(): Promise<void> } {
  let stopped = false;
  const work = (async () => {
    for (let n = 0; !stopped; n++) {
      try {
        const created = await api.post('/conversations', { title: `churn ${n}`, initial_message: `churn ${n}`, run: false });
        if (created.status !== 201) continue;
        const id = created.json().id as string;
        churned.created.add(id);
        if (n % 2 === 0) continue;
        churned.deleting.add(id);
        if ((await api.request('DELETE', `/conversations/${id}?delete_workdir=true`)).status === 204) churned.deleted.add(id);
      } catch {
        return; // the server is gone
      }
      await sleep(20);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await work;
    },
  };
}

/** Starts (or resumes) every conversation's run, and posts a message into one of them. */
async function resumeRuns(): Promise<number> {
  const mark = llm.requests.length;
  for (const id of acknowledged.keys()) {
    const started = await api.post(`/conversations/${id}/run`);
    expect(started.status, started.text).toBe(202);
  }
  const [first] = acknowledged.keys();
  const message = await api.post(`/conversations/${first}/messages`, { content: 'Also keep a log.' });
  expect(message.status, message.text).toBe(202);
  const event = message.json().event as { seq: number };
  acknowledged.get(first!)!.set(event.seq, canonicalJson(event));
  return mark;
}

/** Everything that must hold after a restart; returns the problems found. */
async function checkAfterRestart(cycle: number): Promise<string[]> {
  const problems: string[] = [];
  // Nothing the killed server started lives on (its shells are reaped at start-up; none started since).
  const leftovers = () => processesUsing(dataDir, [server!.child.pid!]);
  await until(() => leftovers().length === 0, 'processes of the killed server to be gone', 3_000).catch(() => problems.push(`cycle ${cycle}: processes left behind: ${leftovers().join('; ')}`));
  // Every conversation the API confirmed is there, every deletion it confirmed holds, and every listed one loads.
  const listed = new Set(await allConversationIds(api));
  for (const id of [...acknowledged.keys(), ...churned.created]) {
    if (churned.deleted.has(id) ? listed.has(id) : !listed.has(id) && !churned.deleting.has(id)) problems.push(`cycle ${cycle} ${id}: ${listed.has(id) ? 'deleted but still listed' : 'not listed'}`);
  }
  for (const id of churned.deleted) if ((await api.get(`/conversations/${id}`)).status !== 404) problems.push(`cycle ${cycle} ${id}: deleted but still there`);
  for (const id of listed) {
    if (acknowledged.has(id)) continue;
    const [conversation, events] = [await api.get(`/conversations/${id}`), await api.get(`/conversations/${id}/events?limit=1000`)];
    if (conversation.status !== 200 || events.status !== 200) problems.push(`cycle ${cycle} ${id}: listed but does not load (${conversation.status}, ${events.status})`);
    else if (events.json().items[0]?.content !== conversation.json().title) problems.push(`cycle ${cycle} ${id}: listed without its first message`);
    else problems.push(...eventProblems(events.json().items).map((problem) => `cycle ${cycle} ${id}: ${problem}`));
  }
  for (const [id, known] of acknowledged) {
    const response = await api.get(`/conversations/${id}`);
    if (response.status !== 200) {
      problems.push(`cycle ${cycle} ${id}: GET → ${response.status}`);
      continue;
    }
    const conversation = response.json();
    if (conversation.status === 'running' || conversation.current_run_id !== null) problems.push(`cycle ${cycle} ${id}: left ${conversation.status}`);
    const { events, texts } = await allEvents(api, id);
    problems.push(...eventProblems(events, { pendingCallIds: conversation.pending_actions.map((action: { tool_call_id: string }) => action.tool_call_id) }).map((problem) => `cycle ${cycle} ${id}: ${problem}`));
    if (conversation.event_count !== events.length) problems.push(`cycle ${cycle} ${id}: event_count ${conversation.event_count} for ${events.length} events`);
    for (const [seq, text] of known) {
      const stored = texts[seq - 1];
      if (stored === text || (stored !== undefined && canonicalJson(JSON.parse(stored)) === text)) continue;
      problems.push(`cycle ${cycle} ${id}: acknowledged seq ${seq} is ${stored === undefined ? 'gone' : 'different'}`);
    }
    const runs = (await api.get(`/conversations/${id}/runs?limit=1000`)).json().items as Array<{ status: string }>;
    if (runs.some((run) => run.status === 'running')) problems.push(`cycle ${cycle} ${id}: a run record is still running`);
    acknowledge(id, events);
  }
  return problems;
}

/** The first LLM request of each resumed run: every assistant tool call has its tool message. */
async function checkResumedRequests(mark: number, cycle: number): Promise<string[]> {
  const firstOf = (model: string) => llm.requests.find((request) => request.index >= mark && request.body.model === model);
  await until(() => [...models.values()].every((model) => firstOf(model) !== undefined), 'every resumed run to ask the LLM');
  const problems: string[] = [];
  for (const model of models.values()) {
    const messages = firstOf(model)!.body.messages ?? [];
    const answered = new Set(messages.filter((message) => message.role === 'tool').map((message) => message.tool_call_id));
    for (const message of messages) {
      for (const call of message.tool_calls ?? []) if (!answered.has(call.id)) problems.push(`cycle ${cycle} ${model}: tool call ${call.id} has no result in the next request`);
    }
  }
  return problems;
}

beforeAll(async () => {
  llm = await startFakeLlm({ whenExhausted: nextTurn });
  receiverPort = await freePort();
  await openReceiver();
  dataDir = tempDir('agentd-crash-');
});
afterAll(async () => {
  // The last server stops cleanly (SIGTERM), taking its shells along: nothing outlives the test.
  if (server) {
    server.child.kill('SIGTERM');
    await server.exited;
  }
  await llm?.close();
  await receiver?.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe(`${KILLS} kill -9 during agent runs and webhook deliveries`, () => {
  it('loses nothing acknowledged and leaves every conversation consistent', async () => {
    await spawn();
    for (let index = 0; index < 2; index++) await createConversation(index);
    let mark = await resumeRuns();
    const problems: string[] = [];
    const timings: number[] = [];
    for (let cycle = 1; cycle <= KILLS; cycle++) {
      // Most kills land in the thick of the runs; some right after they (re)start.
      const delay = cycle % 4 === 0 ? Math.floor(Math.random() * 150) : 300 + Math.floor(Math.random() * 1200);
      timings.push(delay);
      // Half way, the receiver goes down: deliveries pile up across the kills that follow.
      if (cycle === Math.ceil(KILLS / 2)) {
        await receiver!.close();
        receiver = null;
      }
      // The kill lands while the runs work and the API is being read.
      const actionsBefore = actionsAcknowledged();
      const [polling, churning] = [pollEvents(), churn()];
      // On a loaded machine the runs may not have acted yet: the kill waits for some work to interrupt (else the delay alone).
      if (cycle % 4 !== 0) await until(() => actionsAcknowledged() >= actionsBefore + 3, 'the runs to act before the kill', 60_000);
      await sleep(delay);
      await kill();
      await Promise.all([polling.stop(), churning.stop()]);
      await spawn();
      problems.push(...(await checkAfterRestart(cycle)));
      if (cycle < KILLS) {
        await createConversation(cycle + 1);
        mark = await resumeRuns();
        problems.push(...(await checkResumedRequests(mark, cycle)));
      }
    }
    expect(problems).toEqual([]);
    expect(llm.violations).toEqual([]);

    // The runs did real work between kills, and the kills interrupted some of it.
    const all = await Promise.all([...acknowledged.keys()].map(async (id) => ({ id, ...(await allEvents(api, id)) })));
    const kinds = all.flatMap(({ events }) => events.map((event) => event.kind));
    expect(kinds.filter((kind) => kind === 'action').length).toBeGreaterThan(KILLS * 2);
    expect(all.flatMap(({ events }) => events).some((event) => (event as { data?: { interrupted?: boolean } }).data?.interrupted === true)).toBe(true);

    // Webhooks: after the last restart and with the receiver back, every event of every conversation arrives, in order.
    const pendingBefore = all.reduce((n, { id, events }) => n + events.length - new Set(received.filter((request) => request.json.conversation_id === id).map((request) => request.json.event.id)).size, 0);
    expect(pendingBefore).toBeGreaterThan(0);
    await openReceiver();
    const total = all.reduce((n, { events }) => n + events.length, 0);
    const firstArrivals = (id: string) => {
      const seen = new Set<string>();
      return received.filter((request) => request.json.conversation_id === id && !seen.has(String(request.headers['webhook-id'])) && seen.add(String(request.headers['webhook-id'])));
    };
    await until(() => all.every(({ id, events }) => firstArrivals(id).length >= events.length), `${total} events to reach the receiver`, 30_000);
    for (const { id, events, texts } of all) {
      const arrivals = firstArrivals(id);
      expect(arrivals.map((request) => request.json.event.seq), id).toEqual(events.map((event) => event.seq));
      for (const request of arrivals) {
        expect(request.body.slice(request.body.indexOf('"event":') + '"event":'.length, -1)).toBe(texts[request.json.event.seq - 1]);
        expect(request.headers['webhook-signature']).toBe(expectedSignature(HOOK_SECRET, request));
      }
    }
    // No run failed on an internal error in any of the server processes.
    const logs = [...outputs, server!.output()].join('\n');
    expect(logs).not.toMatch(/"level":(50|60)/);
    console.log(`crash: ${KILLS} kills after ${timings.join(', ')} ms; ${acknowledged.size} conversations running agents, ${churned.created.size} created and ${churned.deleted.size} deleted around the kills, ${total} events, ${received.length} webhook requests (${pendingBefore} held up by the outage)`);
  }, scaled(120_000, 300_000));
});
