// The run loop's turn outcomes, one by one: executeRun on the in-memory event log with a scripted
// LlmClient (no HTTP, no processes), asserting the events each outcome records, in order and in
// full, and how the run ends.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConversationHistory } from '../../src/core/agent/conversation-history.js';
import { LlmError, type LlmClient, type LlmRequest, type LlmResponse } from '../../src/core/agent/llm.js';
import type { RunContext } from '../../src/core/agent/run-context.js';
import { replyOf } from '../../src/core/agent/llm-turn.js';
import { executeRun } from '../../src/core/agent/run-loop.js';
import type { Run } from '../../src/core/agent/run-record.js';
import { ToolGate } from '../../src/core/agent/tool-gate.js';
import { TurnInterrupts } from '../../src/core/agent/turn-interrupts.js';
import { DeltaChannel } from '../../src/core/events/delta-channel.js';
import { EventRecorder } from '../../src/core/events/event-recorder.js';
import { MemoryEventLog } from '../../src/core/events/memory-event-log.js';
import { HookRunner } from '../../src/core/hooks/hook-runner.js';
import type { HookTransport } from '../../src/core/hooks/hook-transport.js';
import { PermissionPolicy } from '../../src/core/permissions/permission-policy.js';
import { TreeSitterShellParser } from '../../src/adapters/shell-syntax/index.js';
import type { PendingAction } from '../../src/core/schemas/conversation.js';
import type { AgentEvent, NewEvent } from '../../src/core/schemas/event.js';
import type { Hooks } from '../../src/core/schemas/tool-control.js';
import { finishTool } from '../../src/core/tools/finish.js';
import { defineTool, type ToolDefinition } from '../../src/core/tools/tool.js';

type Turn = (request: LlmRequest) => LlmResponse | Promise<LlmResponse>;

/** An LlmClient that answers from a script, one turn per request, and keeps what it was asked. */
class ScriptedLlm implements LlmClient {
  readonly requests: LlmRequest[] = [];
  constructor(
    private readonly turns: Turn[],
    private readonly jsonSchema = false,
  ) {}
  async complete(request: LlmRequest): Promise<LlmResponse> {
    this.requests.push({ ...request, messages: structuredClone(request.messages) });
    const turn = this.turns.shift();
    if (!turn) throw new Error('the script ran out');
    return turn(request);
  }
  supportsJsonSchema(): boolean {
    return this.jsonSchema;
  }
}

const usage = { prompt_tokens: 10, completion_tokens: 2, cost: 0, cached_tokens: 0, reasoning_tokens: 0 };
const reply = (response: Partial<LlmResponse>): Turn => () => ({ content: null, toolCalls: [], usage, finishReason: 'stop', ...response });
const says = (text: string) => reply({ content: text });
const call = (name: string, args: unknown, id: string) => ({ id, name, arguments: typeof args === 'string' ? args : JSON.stringify(args) });
const calls = (...toolCalls: ReturnType<typeof call>[]) => reply({ toolCalls, finishReason: 'tool_calls' });
/** A turn that ends only when its signal is aborted (the run stopped, or an interrupt came). */
const hangs: Turn = (request) =>
  new Promise((_resolve, reject) => {
    if (request.signal.aborted) reject(request.signal.reason);
    else request.signal.addEventListener('abort', () => reject(request.signal.reason));
  });

const echoTool = defineTool({
  name: 'echo',
  description: 'Says the text back.',
  parameters: z.object({ text: z.string() }),
  async execute(input) {
    return { content: `echo: ${input.text}`, isError: false };
  },
});

/** A tool that runs until its signal is aborted, and tells when it has started. */
function waitingTool(started: () => void) {
  return defineTool({
    name: 'wait',
    description: 'Waits until stopped.',
    parameters: z.object({}),
    async execute(_input, context) {
      started();
      if (!context.signal.aborted) await new Promise((resolve) => context.signal.addEventListener('abort', resolve));
      return { content: 'stopped waiting', isError: false };
    },
  });
}

const RUN_ID = randomUUID();

/** Hook commands answered from a script: exit 2 blocks with stderr as the reason, exit 0 lets it go. */
function scriptedHooks(exits: { exitCode: number; stderr?: string }[]): HookTransport {
  return {
    command: async () => {
      const next = exits.shift() ?? { exitCode: 0 };
      return { exitCode: next.exitCode, stdout: '', stderr: next.stderr ?? '', timedOut: false };
    },
    http: () => Promise.reject(new Error('no http hooks here')),
  };
}

function setUp(options: { turns: Turn[]; tools?: ToolDefinition[]; maxIterations?: number; confirmationMode?: boolean; hooks?: Hooks; hookExits?: { exitCode: number; stderr?: string }[]; approved?: PendingAction[]; jsonSchema?: boolean; sessionStart?: boolean }) {
  const conversationId = randomUUID();
  const log = new MemoryEventLog();
  const history = new ConversationHistory();
  const recorder = new EventRecorder({ log, deltas: new DeltaChannel(), readers: [{ name: 'history', read: ({ event }) => history.apply(event) }] });
  const append = async (event: NewEvent) => (await recorder.append(conversationId, event)).event;
  const llm = new ScriptedLlm(options.turns, options.jsonSchema);
  const controller = new AbortController();
  const run: Run = { id: RUN_ID, conversation_id: conversationId, status: 'running', started_at: new Date().toISOString(), ended_at: null, iterations: 0, usage: { prompt_tokens: 0, completion_tokens: 0, cost: 0 }, outcome: null, error: null };
  const tools = new Map((options.tools ?? [echoTool as ToolDefinition, finishTool as ToolDefinition]).map((tool) => [tool.name, tool]));
  const pending: PendingAction[][] = [];
  const hooks = new HookRunner({
    hooks: options.hooks ?? {},
    transport: scriptedHooks(options.hookExits ?? []),
    base: { conversation_id: conversationId, run_id: RUN_ID, cwd: '/nowhere' },
    signal: controller.signal,
    append: (event) => void append(event),
  });
  const gate = new ToolGate({ policy: async () => new PermissionPolicy({ confirmationMode: options.confirmationMode ?? false, readers: { shellParser: new TreeSitterShellParser(), resolvePath: async () => null } }), hooks, workdir: '/nowhere' });
  const context: RunContext = {
    conversationId,
    run,
    signal: controller.signal,
    history,
    llm,
    settings: () => ({ llm: { model: 'scripted' }, maxIterations: options.maxIterations ?? 50, confirmationMode: options.confirmationMode ?? false }),
    tools,
    toolSchemas: [...tools.values()].map((tool) => ({ name: tool.name, description: tool.description, parameters: {} })),
    toolContext: { conversationId, workdir: '/nowhere', workdirFs: {} as never, signal: controller.signal, state: new Map(), shell: () => Promise.reject(new Error('no shell here')) },
    append,
    delta: () => {},
    onUsage: async () => {},
    condenser: { due: () => null, run: async () => ({ kind: 'nothing' }) as never },
    interrupts: new TurnInterrupts(),
    onIteration: () => void (run.iterations += 1),
    setPendingActions: (actions) => void pending.push(actions),
    approved: options.approved ?? [],
    gate,
    sessionStart: options.sessionStart ?? false,
  };
  const end = () => executeRun(context);
  /** The events as recorded, without what the log adds (id, seq, time) and the random response ids. */
  const events = async () => (await log.read(conversationId, { order: 'asc', limit: 1000 })).map(({ event }) => recorded(event));
  const userMessage = (content: string, extra: Partial<NewEvent> = {}) => append({ kind: 'message', source: 'user', role: 'user', content, ...extra } as NewEvent);
  return { context, llm, run, controller, pending, events, end, userMessage, append };
}

function recorded(event: AgentEvent): Record<string, unknown> {
  const { id: _id, seq: _seq, timestamp: _timestamp, conversation_id: _conversation, llm_response_id: _response, ...rest } = event as AgentEvent & { llm_response_id?: string };
  if (rest.kind === 'hook') delete (rest as { duration_ms?: number }).duration_ms;
  return rest;
}

const user = (content: string) => ({ kind: 'message', source: 'user', role: 'user', content });
const said = (content: string) => ({ kind: 'message', source: 'agent', role: 'assistant', content, run_id: RUN_ID });
const note = (content: string) => ({ kind: 'message', source: 'system', role: 'user', content, run_id: RUN_ID });
const action = (id: string, name: string, args: Record<string, unknown>, thought: string | null = null) => ({ kind: 'action', source: 'agent', tool_call_id: id, tool_name: name, arguments: args, thought, run_id: RUN_ID });
const observed = (id: string, name: string, content: string, options: { isError?: boolean; data?: Record<string, unknown> } = {}) => ({ kind: 'observation', source: 'environment', tool_call_id: id, tool_name: name, content, is_error: options.isError ?? false, data: options.data ?? {}, run_id: RUN_ID });
const notRun = (id: string, name: string, content: string, error: string) => observed(id, name, content, { isError: true, data: { error } });

const CUT_OFF = 'Your last response was cut off at the output token limit. Continue from where it stopped; keep each response and tool call shorter (write a large file in several parts).';
const CUT_OFF_EMPTY = 'Your last response reached the output token limit before it contained any text or tool call (the reasoning may have used the whole budget). Continue the task with a shorter response.';
const EMPTY = 'Your last response was empty. Continue the task: call a tool, or answer the user.';
const CUT_CALL = 'Not run: your response was cut off at the output token limit before the arguments of this call were complete. Make the call again with shorter arguments (write a large file in several parts).';
const FINISH_NOT_ALONE = 'Not run: `finish` was called in the same reply as other tool calls, so you had not seen their results. Their results are above: check them, and call `finish` alone in a reply of its own if the task is done.';
const INTERRUPTED_NOT_RUN = 'Not run: the user interrupted this turn with a new message (below). Read it before doing anything else.';
const BUDGET_SPENT_RESULT = 'Not run: this run has used all its steps (max_iterations_per_run). Only a text summary was asked for.';
const lastStepNote = (limit: number) =>
  `This is the last step of this run: it may take at most ${limit} steps (max_iterations_per_run). Do not call any tool now. ` +
  'Reply with a short summary for the user: what is done, what is left to do, and the next step you would take. The user can continue the run afterwards.';
const nudge = (pattern: string) =>
  `You ${pattern}. Doing it again will not give a different result. Stop and think about why it is not working: ` +
  're-read the error and the relevant code, try a genuinely different approach, or, if you are blocked, explain the problem to the user in a reply without tool calls. ' +
  'If this loop goes on, the run will be stopped.';

describe('the run loop: each turn ends in one named outcome', () => {
  describe('answer', () => {
    it('a text answer is recorded and the run goes idle', async () => {
      const { userMessage, end, events, run } = setUp({ turns: [says('Hello there.')] });
      await userMessage('Hi');
      expect(await end()).toEqual({ kind: 'idle' });
      expect(await events()).toEqual([user('Hi'), said('Hello there.')]);
      expect(run.iterations).toBe(1);
    });

    it('a message that arrived while the model answered gets a turn of its own', async () => {
      let setup: ReturnType<typeof setUp>;
      const arrives: Turn = async () => {
        await setup.userMessage('One more thing');
        return { content: 'First answer.', toolCalls: [], usage, finishReason: 'stop' };
      };
      setup = setUp({ turns: [arrives, says('Second answer.')] });
      await setup.userMessage('Hi');
      expect(await setup.end()).toEqual({ kind: 'idle' });
      expect(await setup.events()).toEqual([user('Hi'), user('One more thing'), said('First answer.'), said('Second answer.')]);
      // The message that arrived during the turn follows the answer it did not see.
      expect(setup.llm.requests[1]!.messages.map((message) => message.content)).toEqual(['Hi', 'First answer.', 'One more thing']);
    });

    it('an answer that misses the output schema is sent back with what was wrong; a valid one is the run output', async () => {
      const { userMessage, end, events, run } = setUp({ turns: [says('not json'), says('{"n": 3}')], jsonSchema: true });
      await userMessage('Count', { output_schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] } } as Partial<NewEvent>);
      expect(await end()).toEqual({ kind: 'idle' });
      const all = await events();
      expect(all.slice(1).map((event) => event.kind === 'message' && event.source)).toEqual(['agent', 'system', 'agent']);
      expect(all[2]).toEqual(note(expect.stringMatching(/^Your answer does not match the required output schema:\n/) as unknown as string));
      expect(run.output).toEqual({ n: 3 });
    });

    it('a Stop hook may keep the run going: the model hears why', async () => {
      const { userMessage, end, events } = setUp({ turns: [says('Done?'), says('Done.')], hooks: { Stop: [{ hooks: [{ type: 'command', command: 'check-stop' }] }] }, hookExits: [{ exitCode: 2, stderr: 'run the tests first' }, { exitCode: 0 }] });
      await userMessage('Work');
      expect(await end()).toEqual({ kind: 'idle' });
      const hook = (decision: string, reason: string | null) => ({ kind: 'hook', source: 'system', hook_point: 'Stop', matcher: null, hook: 'check-stop', decision, reason, tool_call_id: null, tool_name: null, run_id: RUN_ID });
      expect(await events()).toEqual([user('Work'), said('Done?'), hook('block', 'run the tests first'), note('A Stop hook asks you to continue: run the tests first'), said('Done.'), hook('allow', null)]);
    });
  });

  describe('refused', () => {
    it("the model's refusal is recorded as its answer and the run goes idle", async () => {
      const { userMessage, end, events } = setUp({ turns: [reply({ content: '', refusal: "I can't help with that." })] });
      await userMessage('Do something bad');
      expect(await end()).toEqual({ kind: 'idle' });
      expect(await events()).toEqual([user('Do something bad'), said("I can't help with that.")]);
    });
  });

  describe('tool_calls', () => {
    it('the calls run in order, each action before its observation, then the model is asked again', async () => {
      const { userMessage, end, events } = setUp({ turns: [calls(call('echo', { text: 'a' }, 'c1'), call('echo', { text: 'b' }, 'c2')), says('Both echoed.')] });
      await userMessage('Echo twice');
      expect(await end()).toEqual({ kind: 'idle' });
      expect(await events()).toEqual([user('Echo twice'), action('c1', 'echo', { text: 'a' }), observed('c1', 'echo', 'echo: a'), action('c2', 'echo', { text: 'b' }), observed('c2', 'echo', 'echo: b'), said('Both echoed.')]);
    });

    it('finish ends the run as finished; beside other calls it is not run', async () => {
      const { userMessage, end, events } = setUp({ turns: [calls(call('finish', { message: 'early' }, 'f1'), call('echo', { text: 'a' }, 'c1')), calls(call('finish', { message: 'All done.' }, 'f2'))] });
      await userMessage('Work');
      expect(await end()).toEqual({ kind: 'finished', message: 'All done.' });
      expect(await events()).toEqual([
        user('Work'),
        action('c1', 'echo', { text: 'a' }),
        observed('c1', 'echo', 'echo: a'),
        action('f1', 'finish', { message: 'early' }),
        notRun('f1', 'finish', FINISH_NOT_ALONE, 'finish_not_alone'),
        action('f2', 'finish', { message: 'All done.' }),
        observed('f2', 'finish', 'All done.', { data: { finished: true } }),
      ]);
    });

    it('arguments that are not JSON come back as an error the model can act on', async () => {
      const { userMessage, end, events } = setUp({ turns: [calls(call('echo', '{"text": ', 'c1')), says('Sorry.')] });
      await userMessage('Echo');
      expect(await end()).toEqual({ kind: 'idle' });
      const all = await events();
      expect(all.slice(0, 2)).toEqual([user('Echo'), action('c1', 'echo', {})]);
      expect(all[2]).toMatchObject({ kind: 'observation', tool_call_id: 'c1', is_error: true, data: { error: 'invalid_arguments' } });
      expect(all[3]).toEqual(said('Sorry.'));
    });

    it('calls that need approval leave the run waiting for confirmation', async () => {
      const { userMessage, end, events, pending } = setUp({ turns: [calls(call('echo', { text: 'a' }, 'c1'))], confirmationMode: true });
      await userMessage('Echo');
      expect(await end()).toEqual({ kind: 'waiting_for_confirmation' });
      const all = await events();
      expect(all).toEqual([user('Echo'), action('c1', 'echo', { text: 'a' })]);
      expect(pending).toEqual([[{ tool_call_id: 'c1', tool_name: 'echo', arguments: { text: 'a' }, event_id: expect.any(String) }]]);
    });

    it('approved actions run before the first turn', async () => {
      const { userMessage, append, end, events } = setUp({ turns: [says('Echoed.')], approved: [{ tool_call_id: 'c1', tool_name: 'echo', arguments: { text: 'a' }, event_id: randomUUID() }] });
      await userMessage('Echo');
      await append({ kind: 'action', source: 'agent', tool_call_id: 'c1', tool_name: 'echo', arguments: { text: 'a' }, thought: null, run_id: RUN_ID });
      expect(await end()).toEqual({ kind: 'idle' });
      expect(await events()).toEqual([user('Echo'), action('c1', 'echo', { text: 'a' }), observed('c1', 'echo', 'echo: a'), said('Echoed.')]);
    });
  });

  describe('cut_off', () => {
    it('an answer cut at the output limit is kept, the model is told, and asked again', async () => {
      const { userMessage, end, events } = setUp({ turns: [reply({ content: 'The first half', finishReason: 'length' }), reply({ finishReason: 'length' }), says('The rest.')] });
      await userMessage('Write');
      expect(await end()).toEqual({ kind: 'idle' });
      expect(await events()).toEqual([user('Write'), said('The first half'), note(CUT_OFF), note(CUT_OFF_EMPTY), said('The rest.')]);
    });

    it('a call whose arguments were cut is not run', async () => {
      const { userMessage, end, events } = setUp({ turns: [reply({ toolCalls: [call('echo', '{"text": "ab', 'c1')], finishReason: 'length' }), says('Shorter.')] });
      await userMessage('Echo');
      expect(await end()).toEqual({ kind: 'idle' });
      expect(await events()).toEqual([user('Echo'), action('c1', 'echo', {}), notRun('c1', 'echo', CUT_CALL, 'output_truncated'), said('Shorter.')]);
    });

    it('cut off more times in a row than the run tolerates, the run fails', async () => {
      const cut = reply({ content: 'cut', finishReason: 'length' });
      const { userMessage, end, events } = setUp({ turns: [cut, cut, cut, cut] });
      await userMessage('Write');
      expect(await end()).toEqual({ kind: 'error', code: 'llm_output_truncated', message: "The model's answer was cut off at the output token limit 4 times in a row: raise max_output_tokens." });
      expect(await events()).toEqual([user('Write'), said('cut'), note(CUT_OFF), said('cut'), note(CUT_OFF), said('cut'), note(CUT_OFF), said('cut')]);
    });
  });

  describe('empty (beside the eight: a reply with nothing in it)', () => {
    it('the model is told and asked again; three times in a row and the run fails', async () => {
      const empty = reply({ content: '  ' });
      const { userMessage, end, events } = setUp({ turns: [empty, empty, empty] });
      await userMessage('Hi');
      expect(await end()).toEqual({ kind: 'error', code: 'llm_empty_response', message: 'The model answered with nothing 3 times in a row.' });
      expect(await events()).toEqual([user('Hi'), note(EMPTY), note(EMPTY)]);
    });
  });

  describe('stuck', () => {
    it('the same call with the same result: a nudge first, then the run stops as stuck', async () => {
      const same = (n: number) => calls(call('echo', { text: 'again' }, `c${n}`));
      const { userMessage, end, events } = setUp({ turns: Array.from({ length: 8 }, (_, n) => same(n + 1)) });
      await userMessage('Loop');
      const pattern = 'have made the same call with the same result 4 times in a row';
      expect(await end()).toEqual({ kind: 'stuck', reason: `The agent ${pattern.replace('have', 'has')}, and went on after being told so.` });
      const step = (n: number) => [action(`c${n}`, 'echo', { text: 'again' }), observed(`c${n}`, 'echo', 'echo: again')];
      expect(await events()).toEqual([user('Loop'), ...step(1), ...step(2), ...step(3), ...step(4), note(nudge(pattern)), ...step(5), ...step(6), ...step(7), ...step(8)]);
    });
  });

  describe('budget_spent', () => {
    it('on the last step the model is asked for a summary; calls it makes anyway are not run', async () => {
      const { userMessage, end, events, llm } = setUp({ turns: [calls(call('echo', { text: 'a' }, 'c1')), calls(call('echo', { text: 'b' }, 'c2')), reply({ content: 'Summary.', toolCalls: [call('echo', { text: 'c' }, 'c3')] })], maxIterations: 3 });
      await userMessage('Work');
      expect(await end()).toEqual({ kind: 'max_iterations', limit: 3 });
      expect(await events()).toEqual([
        user('Work'),
        action('c1', 'echo', { text: 'a' }),
        observed('c1', 'echo', 'echo: a'),
        action('c2', 'echo', { text: 'b' }),
        observed('c2', 'echo', 'echo: b'),
        note(lastStepNote(3)),
        action('c3', 'echo', { text: 'c' }, 'Summary.'),
        notRun('c3', 'echo', BUDGET_SPENT_RESULT, 'budget_spent'),
      ]);
      expect(llm.requests.map((request) => request.toolChoice ?? 'auto')).toEqual(['auto', 'auto', 'none']);
    });

    it('the summary answer is recorded; a warning comes at four fifths of the budget', async () => {
      const echo = (n: number) => calls(call('echo', { text: `${n}` }, `c${n}`));
      const { userMessage, end, events } = setUp({ turns: [echo(1), echo(2), echo(3), echo(4), says('Summary.')], maxIterations: 5 });
      await userMessage('Work');
      expect(await end()).toEqual({ kind: 'max_iterations', limit: 5 });
      const step = (n: number) => [action(`c${n}`, 'echo', { text: `${n}` }), observed(`c${n}`, 'echo', `echo: ${n}`)];
      const warning = 'You have used 3 of the 5 steps this run may take. Bring the work to a safe point: finish the change in progress and verify it. Call `finish` if the task is done; otherwise you will be asked for a summary on the last step.';
      expect(await events()).toEqual([user('Work'), ...step(1), ...step(2), ...step(3), note(warning), ...step(4), note(lastStepNote(5)), said('Summary.')]);
    });

    it('a run of one step ends after it, with no summary', async () => {
      const { userMessage, end, events, run } = setUp({ turns: [calls(call('echo', { text: 'a' }, 'c1'))], maxIterations: 1 });
      await userMessage('Work');
      expect(await end()).toEqual({ kind: 'max_iterations', limit: 1 });
      expect(await events()).toEqual([user('Work'), action('c1', 'echo', { text: 'a' }), observed('c1', 'echo', 'echo: a')]);
      expect(run.iterations).toBe(1);
    });
  });

  describe('aborted', () => {
    it('a stop while the model answers ends the run with nothing more recorded', async () => {
      let setup: ReturnType<typeof setUp>;
      const stopped: Turn = (request) => {
        setup.controller.abort(new Error('paused'));
        return hangs(request);
      };
      setup = setUp({ turns: [stopped] });
      await setup.userMessage('Hi');
      expect(await setup.end()).toEqual({ kind: 'aborted' });
      expect(await setup.events()).toEqual([user('Hi')]);
    });

    it('a stop while a tool runs: its observation is recorded, the calls after it are not', async () => {
      let setup: ReturnType<typeof setUp> | undefined;
      const wait = waitingTool(() => setup!.controller.abort(new Error('paused')));
      setup = setUp({ turns: [calls(call('wait', {}, 'w1'), call('echo', { text: 'a' }, 'c1'))], tools: [wait as ToolDefinition, echoTool as ToolDefinition] });
      await setup.userMessage('Wait');
      expect(await setup.end()).toEqual({ kind: 'aborted' });
      expect(await setup.events()).toEqual([user('Wait'), action('w1', 'wait', {}), observed('w1', 'wait', 'stopped waiting')]);
    });
  });

  describe('failed', () => {
    it('an LLM request that fails (retries spent) ends the run in an agent error', async () => {
      const { userMessage, end, events } = setUp({ turns: [() => Promise.reject(new LlmError('llm_server_error', 'The provider answered 500.', 500))] });
      await userMessage('Hi');
      expect(await end()).toEqual({ kind: 'error', code: 'llm_server_error', message: 'The provider answered 500.' });
      expect(await events()).toEqual([user('Hi')]);
    });

    it('answers that miss the output schema past the bound end the run in an agent error', async () => {
      const { userMessage, end } = setUp({ turns: [says('no'), says('no'), says('no')], jsonSchema: true });
      await userMessage('Count', { output_schema: { type: 'object' } } as Partial<NewEvent>);
      expect(await end()).toMatchObject({ kind: 'error', code: 'llm_output_invalid' });
    });
  });

  describe('interrupted (beside the eight: a user message stopped the turn)', () => {
    it('an interrupt during the LLM request drops the answer and asks again with the message in view', async () => {
      let setup: ReturnType<typeof setUp>;
      const interrupted: Turn = async (request) => {
        const message = await setup.userMessage('Stop, do this instead', { multitask_strategy: 'interrupt' } as Partial<NewEvent>);
        setup.context.interrupts.trigger(message.seq);
        return hangs(request);
      };
      setup = setUp({ turns: [interrupted, says('Doing that instead.')] });
      await setup.userMessage('Hi');
      expect(await setup.end()).toEqual({ kind: 'idle' });
      expect(await setup.events()).toEqual([
        user('Hi'),
        { ...user('Stop, do this instead'), multitask_strategy: 'interrupt' },
        { kind: 'interrupt', source: 'user', run_id: RUN_ID, message_seq: 2, stopped: 'llm', tool_call_ids: [] },
        said('Doing that instead.'),
      ]);
      expect(setup.llm.requests[1]!.messages.map((message) => message.content)).toEqual(['Hi', 'Stop, do this instead']);
    });

    it('an interrupt during a call stops it; the calls after it are recorded, not run', async () => {
      let setup: ReturnType<typeof setUp> | undefined;
      const wait = waitingTool(() => {
        void setup!.userMessage('Stop', { multitask_strategy: 'interrupt' } as Partial<NewEvent>).then((message) => setup!.context.interrupts.trigger(message.seq));
      });
      setup = setUp({ turns: [calls(call('wait', {}, 'w1'), call('echo', { text: 'a' }, 'c1')), says('Stopped.')], tools: [wait as ToolDefinition, echoTool as ToolDefinition] });
      await setup.userMessage('Wait');
      expect(await setup.end()).toEqual({ kind: 'idle' });
      expect(await setup.events()).toEqual([
        user('Wait'),
        action('w1', 'wait', {}),
        { ...user('Stop'), multitask_strategy: 'interrupt' },
        observed('w1', 'wait', 'stopped waiting'),
        action('c1', 'echo', { text: 'a' }),
        notRun('c1', 'echo', INTERRUPTED_NOT_RUN, 'interrupted'),
        { kind: 'interrupt', source: 'user', run_id: RUN_ID, message_seq: 3, stopped: 'tool', tool_call_ids: ['w1', 'c1'] },
        said('Stopped.'),
      ]);
    });
  });

  describe('prompt_blocked (beside the eight: a UserPromptSubmit hook refused the message)', () => {
    it('the model is told not to act on it and the run goes idle without asking it', async () => {
      const { userMessage, end, events, llm } = setUp({ turns: [], hooks: { UserPromptSubmit: [{ hooks: [{ type: 'command', command: 'check-prompt' }] }] }, hookExits: [{ exitCode: 2, stderr: 'no secrets in prompts' }] });
      await userMessage('my password is hunter2');
      expect(await end()).toEqual({ kind: 'idle' });
      expect(await events()).toEqual([
        user('my password is hunter2'),
        { kind: 'hook', source: 'system', hook_point: 'UserPromptSubmit', matcher: null, hook: 'check-prompt', decision: 'block', reason: 'no secrets in prompts', tool_call_id: null, tool_name: null, run_id: RUN_ID },
        note("The user's last message was blocked by a UserPromptSubmit hook and must not be acted on: no secrets in prompts"),
      ]);
      expect(llm.requests).toEqual([]);
    });
  });
});

describe('replyOf: what the model replied, before the turn is played out', () => {
  const response = (fields: Partial<LlmResponse>): LlmResponse => ({ content: null, toolCalls: [], usage, finishReason: 'stop', ...fields });

  it('tells calls, answers, refusals, cut-off and empty replies apart', () => {
    expect(replyOf(response({ content: 'Hi.' }))).toEqual({ kind: 'answer', text: 'Hi.' });
    expect(replyOf(response({ content: ' ', refusal: 'No.' }))).toEqual({ kind: 'refused', text: 'No.' });
    expect(replyOf(response({ content: 'Hi.', refusal: 'No.' }))).toEqual({ kind: 'answer', text: 'Hi.' });
    expect(replyOf(response({ content: 'Hal', finishReason: 'length' }))).toEqual({ kind: 'cut_off', why: 'cut_off' });
    expect(replyOf(response({ refusal: 'N', finishReason: 'length' }))).toEqual({ kind: 'cut_off', why: 'cut_off' });
    expect(replyOf(response({ finishReason: 'length' }))).toEqual({ kind: 'cut_off', why: 'cut_off_empty' });
    expect(replyOf(response({ content: '\n' }))).toEqual({ kind: 'empty' });
    expect(replyOf(response({ content: 'Let me look.', toolCalls: [call('echo', '{"text": "a"}', 'c1'), call('echo', 'not json', 'c2')], finishReason: 'length' }))).toEqual({
      kind: 'calls',
      calls: [
        { call: call('echo', '{"text": "a"}', 'c1'), args: { ok: true, value: { text: 'a' } } },
        { call: call('echo', 'not json', 'c2'), args: { ok: false, error: expect.stringMatching(/^The arguments are not valid JSON/) } },
      ],
      responseId: expect.any(String),
      thought: 'Let me look.',
      cutOff: true,
    });
  });
});
