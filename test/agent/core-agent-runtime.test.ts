// Fast tests of the core, in process: the in-memory event log, a scripted LlmClient, no HTTP, no
// processes. They drive the agent runtime (executeRun), the history fold, pause, confirmation and
// the log's subscribe switch, and synchronise on the log's own subscription.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AgentRuntime } from '../../src/core/agent/agent-runtime.js';
import type { LlmClient, LlmRequest, LlmResponse } from '../../src/core/agent/llm.js';
import type { Run, RunStore } from '../../src/core/agent/run-record.js';
import type { ConversationRecord, ConversationRepository } from '../../src/core/conversations/conversation-record.js';
import { ConversationService } from '../../src/core/conversations/conversation-service.js';
import { ConversationStore } from '../../src/core/conversations/conversation-store.js';
import { HostWorkdirs } from '../../src/adapters/files/host-workdirs.js';
import { AgentSessions } from '../../src/core/agent/agent-sessions.js';
import { DeltaChannel } from '../../src/core/events/delta-channel.js';
import { EventRecorder } from '../../src/core/events/event-recorder.js';
import { MemoryEventLog } from '../../src/core/events/memory-event-log.js';
import { CreateConversationBody } from '../../src/core/schemas/conversation.js';
import type { AgentEvent } from '../../src/core/schemas/event.js';
import { finishTool } from '../../src/core/tools/finish.js';
import { defineTool, type ToolDefinition } from '../../src/core/tools/tool.js';
import type { ShellFactory } from '../../src/core/tools/shell-session.js';
import { tempDir } from '../support/agentd.js';
import { NodeWorkdirFileSystem } from '../../src/adapters/workspace/node-workdir-file-system.js';
import { HostProjectFiles } from '../../src/adapters/workspace/host-project-files.js';
import { TreeSitterShellParser } from '../../src/adapters/shell-syntax/index.js';

type Turn = (request: LlmRequest) => LlmResponse | Promise<LlmResponse>;

/** An LlmClient that answers from a script, one turn per request, and keeps what it was sent. */
class ScriptedLlm implements LlmClient {
  readonly requests: LlmRequest[] = [];
  constructor(private readonly turns: Turn[]) {}
  async complete(request: LlmRequest): Promise<LlmResponse> {
    this.requests.push({ ...request, messages: structuredClone(request.messages) });
    const turn = this.turns.shift();
    if (!turn) throw new Error('the script ran out');
    return turn(request);
  }
}

const usage = { prompt_tokens: 10, completion_tokens: 2, cost: 0, cached_tokens: 0, reasoning_tokens: 0 };
const says = (text: string): Turn => () => ({ content: text, toolCalls: [], usage, finishReason: 'stop' });
const calls = (name: string, args: unknown, id = `call-${name}`): Turn => () => ({ content: null, toolCalls: [{ id, name, arguments: JSON.stringify(args) }], usage, finishReason: 'tool_calls' });
/** A turn that only ends when the run is aborted. */
const hangs: Turn = (request) => new Promise((_resolve, reject) => request.signal.addEventListener('abort', () => reject(request.signal.reason)));

const echoTool = defineTool({
  name: 'echo',
  description: 'Says the text back.',
  parameters: z.object({ text: z.string() }),
  async execute(input) {
    return { content: `echo: ${input.text}`, isError: false };
  },
});

class MemoryRepository implements ConversationRepository {
  readonly saved = new Map<string, ConversationRecord>();
  async loadAll() {
    return { records: [], damaged: [] };
  }
  save(record: ConversationRecord): void {
    this.saved.set(record.id, structuredClone(record));
  }
  remove(id: string): void {
    this.saved.delete(id);
  }
}

class MemoryRuns implements RunStore {
  private readonly runs = new Map<string, Run[]>();
  save(run: Run): void {
    const list = this.runs.get(run.conversation_id) ?? [];
    const at = list.findIndex((candidate) => candidate.id === run.id);
    if (at >= 0) list[at] = structuredClone(run);
    else list.push(structuredClone(run));
    this.runs.set(run.conversation_id, list);
  }
  list(conversationId: string): Run[] {
    return this.runs.get(conversationId) ?? [];
  }
  drop(conversationId: string): void {
    this.runs.delete(conversationId);
  }
}

const noShells: ShellFactory = { create: () => Promise.reject(new Error('no shell in these tests')) };

let dir: string;
let log: MemoryEventLog;

beforeEach(() => {
  dir = tempDir('agentd-core-');
  log = new MemoryEventLog();
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

async function setUp(turns: Turn[], tools: ToolDefinition[] = [echoTool as ToolDefinition, finishTool as ToolDefinition], options: { shells?: ShellFactory; idleTimeoutMs?: number } = {}) {
  const llm = new ScriptedLlm(turns);
  // Wired as in the composition root: the store and the sessions read every event the recorder stores.
  const repository = new MemoryRepository();
  const store = new ConversationStore({ repository, log });
  const sessions = new AgentSessions(log);
  const recorder = new EventRecorder({ log, deltas: new DeltaChannel(), readers: [store.summaryReader, sessions] });
  fs.mkdirSync(path.join(dir, 'data'));
  await store.load();
  const runs = new MemoryRuns();
  const agent = new AgentRuntime({ conversations: store, sessions, recorder, runs, llm, tools, workdirFs: new NodeWorkdirFileSystem(), projectFiles: new HostProjectFiles(), shellParser: new TreeSitterShellParser(), shells: options.shells ?? noShells, ...(options.idleTimeoutMs && { idleTimeoutMs: options.idleTimeoutMs }), shellEnv: () => ({}), hookTransport: () => ({ command: () => Promise.reject(new Error('no hooks in these tests')), http: () => Promise.reject(new Error('no hooks in these tests')) }) as never });
  const conversations = new ConversationService({
    store,
    workdirs: new HostWorkdirs({ dataDir: path.join(dir, 'data'), workdirBase: path.join(dir, 'workdirs') }),
    log,
    recorder,
    runtime: agent,
    defaults: { llm: null, workdirBase: path.join(dir, 'workdirs'), toolNames: tools.map((tool) => tool.name) },
  });
  const create = async (body: Record<string, unknown> = {}) => (await conversations.create(CreateConversationBody.parse({ llm: { model: 'scripted' }, ...body }))).conversation.id;
  return { llm, conversations, agent, runs, create, repository };
}

/** Every event of the conversation from the start until `done` says so: the log's subscription, history then live. */
async function eventsUntil(conversationId: string, done: (event: AgentEvent) => boolean): Promise<AgentEvent[]> {
  const events: AgentEvent[] = [];
  for await (const item of log.subscribe({ conversationId, after: 0 })) {
    if (item.type !== 'event') continue;
    events.push(item.stored.event);
    if (done(item.stored.event)) break;
  }
  return events;
}

const runEnded = (event: AgentEvent) => event.kind === 'state_update' && event.status !== 'running';
const shape = (events: AgentEvent[]) => events.map((event) => (event.kind === 'state_update' ? `state_update:${event.status}` : `${event.kind}:${event.source}`));

describe('the agent runtime over the in-memory log', () => {
  it('runs a message to an answer: the events in order, seqs from 1, usage on the record', async () => {
    const { conversations, create } = await setUp([says('Hello there.')]);
    const id = await create();
    const accepted = await conversations.postMessage(id, { content: 'Hi', run: true });
    expect(accepted.run_id).toEqual(expect.any(String));
    const events = await eventsUntil(id, runEnded);
    expect(shape(events)).toEqual(['message:user', 'state_update:running', 'system_prompt:system', 'usage:system', 'message:agent', 'state_update:idle']);
    expect(events.map((event) => event.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(conversations.get(id)).toMatchObject({ status: 'idle', event_count: 6, usage: { prompt_tokens: 10, completion_tokens: 2 }, current_run_id: null });
  });

  it('folds each tool result into the history the next LLM turn sees (history fold → loop)', async () => {
    const { llm, conversations, create } = await setUp([calls('echo', { text: 'ping' }), says('It said ping.')]);
    const id = await create();
    await conversations.postMessage(id, { content: 'Echo ping', run: true });
    const events = await eventsUntil(id, runEnded);
    expect(shape(events).slice(3)).toEqual(['usage:system', 'action:agent', 'observation:environment', 'usage:system', 'message:agent', 'state_update:idle']);
    const second = llm.requests[1]!.messages;
    expect(second.map((message) => message.role)).toEqual(['system', 'user', 'assistant', 'tool']);
    expect(second.at(-1)).toEqual({ role: 'tool', tool_call_id: 'call-echo', content: 'echo: ping' });
  });

  it('ends the run as finished when the agent calls finish', async () => {
    const { agent, conversations, create } = await setUp([calls('finish', { message: 'All done.' })]);
    const id = await create();
    const { run_id: runId } = await conversations.postMessage(id, { content: 'Do it', run: true });
    const events = await eventsUntil(id, runEnded);
    expect(events.at(-1)).toMatchObject({ kind: 'state_update', status: 'finished' });
    expect(agent.getRun(id, runId!)).toMatchObject({ status: 'completed', outcome: 'finished' });
  });

  it('waits for confirmation, and runs the approved action before asking the LLM again', async () => {
    const { agent, llm, conversations, create } = await setUp([calls('echo', { text: 'careful' }), says('Done carefully.')]);
    const id = await create({ confirmation_mode: true });
    await conversations.postMessage(id, { content: 'Echo carefully', run: true });
    await eventsUntil(id, runEnded);
    expect(conversations.get(id)).toMatchObject({ status: 'waiting_for_confirmation', pending_actions: [{ tool_name: 'echo', arguments: { text: 'careful' } }] });
    await expect(agent.startRun(id)).rejects.toMatchObject({ code: 'confirmation_pending' });

    await agent.approve(id);
    const after = await eventsUntil(id, (event) => runEnded(event) && event.seq > 8);
    const observation = after.find((event) => event.kind === 'observation');
    expect(observation).toMatchObject({ content: 'echo: careful', is_error: false });
    expect(llm.requests).toHaveLength(2);
    expect(conversations.get(id)).toMatchObject({ status: 'idle', pending_actions: [] });
  });

  it('starts a run without saving the record unless the saved one would be wrong: actions waiting are cleared on disk', async () => {
    const { agent, conversations, create, repository, llm } = await setUp([says('Hi.'), hangs, calls('echo', { text: 'careful' }), hangs]);
    const id = await create({ confirmation_mode: true });
    await conversations.postMessage(id, { content: 'Hello', run: true });
    await eventsUntil(id, runEnded);
    expect(repository.saved.get(id)).toMatchObject({ status: 'idle', current_run_id: null });

    // Over a settled status: running in memory, the record on disk as it was (the run record and the event say it runs).
    const { run_id: second } = await conversations.postMessage(id, { content: 'Think long', run: true });
    expect(conversations.get(id)).toMatchObject({ status: 'running', current_run_id: second });
    expect(repository.saved.get(id)).toMatchObject({ status: 'idle', current_run_id: null });
    expect(agent.getRun(id, second!)).toMatchObject({ status: 'running' });
    while (llm.requests.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    await agent.pause(id);
    expect(repository.saved.get(id)).toMatchObject({ status: 'paused', current_run_id: null });

    // Over actions waiting for confirmation: saved at once, so a crash cannot leave them approvable.
    await agent.startRun(id);
    await eventsUntil(id, (event) => event.kind === 'state_update' && event.status === 'waiting_for_confirmation');
    expect(repository.saved.get(id)).toMatchObject({ status: 'waiting_for_confirmation', pending_actions: [{ tool_name: 'echo' }] });
    const approved = await agent.approve(id);
    expect(repository.saved.get(id)).toMatchObject({ status: 'running', current_run_id: approved, pending_actions: [] });
    await agent.pause(id);
  });

  it('pauses a run waiting on the LLM: the run is paused, the lock released, a new run can start', async () => {
    const { agent, conversations, create } = await setUp([hangs, says('Back again.')]);
    const id = await create();
    const { run_id: first } = await conversations.postMessage(id, { content: 'Think long', run: true });
    await eventsUntil(id, (event) => event.kind === 'system_prompt');
    await expect(agent.startRun(id)).rejects.toMatchObject({ code: 'run_in_progress' });
    await agent.pause(id);
    expect(conversations.get(id)).toMatchObject({ status: 'paused', current_run_id: null });
    expect(agent.getRun(id, first!)).toMatchObject({ status: 'paused', outcome: 'paused' });

    const second = await agent.startRun(id);
    const events = await eventsUntil(id, (event) => event.kind === 'message' && event.source === 'agent');
    expect(events.at(-1)).toMatchObject({ content: 'Back again.', run_id: second });
  });

  it('gives a message that arrives while the LLM answers its own turn, after that answer', async () => {
    let release!: () => void;
    const answered = new Promise<void>((resolve) => (release = resolve));
    const { llm, conversations, create } = await setUp([
      async () => {
        await answered;
        return { content: 'First answer.', toolCalls: [], usage, finishReason: 'stop' };
      },
      says('Second answer.'),
    ]);
    const id = await create();
    await conversations.postMessage(id, { content: 'One', run: true });
    await eventsUntil(id, (event) => event.kind === 'system_prompt');
    // Posted mid-turn: joins the running run instead of starting another.
    const second = await conversations.postMessage(id, { content: 'Two', run: true });
    release();
    const events = await eventsUntil(id, runEnded);
    expect(second.run_id).toBe(events.find((event) => event.kind === 'state_update')!.run_id);
    expect(llm.requests[1]!.messages.filter((message) => message.role !== 'system').map((message) => message.content)).toEqual(['One', 'First answer.', 'Two']);
  });

  it('a subscriber that joins mid-run sees history then live with no gap or duplicate', async () => {
    const { conversations, create } = await setUp([calls('echo', { text: 'a' }, 'c1'), calls('echo', { text: 'b' }, 'c2'), says('Both.')]);
    const id = await create();
    await conversations.postMessage(id, { content: 'Go', run: true });
    await eventsUntil(id, (event) => event.kind === 'action');
    const joined = await (async () => {
      const seqs: number[] = [];
      for await (const item of log.subscribe({ conversationId: id, after: 2 })) {
        if (item.type !== 'event') continue;
        seqs.push(item.stored.event.seq);
        if (runEnded(item.stored.event)) break;
      }
      return seqs;
    })();
    const total = conversations.get(id).event_count;
    expect(joined).toEqual(Array.from({ length: total - 2 }, (_, i) => i + 3));
  });
});

describe('shells started ahead of a first run', () => {
  /** A shell factory that counts starts and hands out shells that only close. */
  const countingShells = () => {
    const started: string[] = [];
    const closed: string[] = [];
    const factory: ShellFactory = {
      create: async (options) => {
        started.push(options.conversationId);
        return { close: async () => void closed.push(options.conversationId) } as never;
      },
    };
    return { factory, started, closed };
  };
  const bashTool = defineTool({ name: 'bash', description: 'A stand-in named bash.', parameters: z.object({ command: z.string() }), execute: async () => ({ content: '', isError: false }) }) as ToolDefinition;
  const settle = async () => {
    for (let i = 0; i < 50; i++) await new Promise((resolve) => setImmediate(resolve));
  };

  it('start for a conversation created with an LLM and bash, at most 8 waiting unused, closed with the conversation', async () => {
    const shells = countingShells();
    const { conversations, create } = await setUp([], [bashTool, finishTool as ToolDefinition], { shells: shells.factory, idleTimeoutMs: 60_000 });
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      ids.push(await create());
      await settle();
    }
    expect(shells.started).toEqual(ids.slice(0, 8));
    await create({ llm: undefined, tools: ['finish'] }); // no bash: no shell
    await settle();
    expect(shells.started).toHaveLength(8);

    // One of them is deleted: its shell closes, and the next conversation created gets one.
    await conversations.delete(ids[0]!, { deleteWorkdir: true });
    expect(shells.closed).toEqual([ids[0]]);
    const next = await create();
    await settle();
    expect(shells.started.at(-1)).toBe(next);
  });

  it('a delete that keeps the workdir answers once the shell is killed; one that removes it, and shutdown, wait for its exit', async () => {
    // Shells whose kill is immediate and whose exit comes when the test says.
    const killed: string[] = [];
    const exits = new Map<string, () => void>();
    const factory: ShellFactory = {
      create: async (options) => ({
        close: () => {
          killed.push(options.conversationId);
          return new Promise<void>((resolve) => exits.set(options.conversationId, resolve));
        },
      }) as never,
    };
    const { conversations, agent, create } = await setUp([], [bashTool, finishTool as ToolDefinition], { shells: factory, idleTimeoutMs: 60_000 });
    const [kept, removed] = [await create(), await create()];
    await settle();
    const done = <T>(promise: Promise<T>) => {
      const state = { settled: false, promise };
      void promise.then(() => (state.settled = true));
      return state;
    };

    await conversations.delete(kept, { deleteWorkdir: false });
    expect(killed).toEqual([kept]);
    expect(exits.has(kept)).toBe(true);

    const removing = done(conversations.delete(removed, { deleteWorkdir: true }));
    await settle();
    expect(killed).toEqual([kept, removed]);
    expect(removing.settled).toBe(false);
    exits.get(removed)!();
    await removing.promise;

    // The kept workdir's shell has still not exited: shutdown waits for it.
    const stopping = done(agent.stopAll());
    await settle();
    expect(stopping.settled).toBe(false);
    exits.get(kept)!();
    await stopping.promise;
  });

  it('never start on a server that keeps idle shells forever (no idle timeout to release them)', async () => {
    const off = countingShells();
    const without = await setUp([], [bashTool, finishTool as ToolDefinition], { shells: off.factory });
    await without.create();
    await settle();
    expect(off.started).toEqual([]);
  });
});
