import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { FakeTurn } from '../fake-llm/fake-llm-server.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';

let harness: AgentHarness;
afterEach(async () => harness?.close());

const bash = (args: Record<string, unknown>): FakeTurn => ({ toolCalls: [{ name: 'bash', arguments: args }] });
const editor = (args: Record<string, unknown>): FakeTurn => ({ toolCalls: [{ name: 'file_editor', arguments: args }] });
const finish: FakeTurn = { toolCalls: [{ name: 'finish', arguments: { message: 'done' } }] };

async function run(script: FakeTurn[], body: Record<string, unknown> = {}, statuses = ['finished', 'idle', 'error', 'stuck', 'paused']) {
  harness = await startAgentHarness(script);
  const id = await harness.createConversation({ initial_message: 'go', ...body });
  const done = await harness.waitForStatus(id, statuses, 30_000);
  const events = await harness.events(id);
  return { id, done, events, observations: events.filter((event) => event.kind === 'observation'), notes: events.filter((event) => event.kind === 'message' && event.source === 'system') };
}

describe('tool arguments', () => {
  it('refuses unknown arguments with a hint and accepts the common aliases', async () => {
    const { observations, done } = await run([
      bash({ command: 'echo hi', timeout: 600 }),
      editor({ command: 'create', file_path: 'a.txt', file_text: 'one\none\n' }),
      editor({ command: 'str_replace', path: 'a.txt', old_str: 'one', new_str: 'two', replace_everything: true }),
      bash({ command: 'echo hi', timout_s: 5 }),
      finish,
    ]);
    expect(done.status).toBe('finished');
    expect(observations[0]).toMatchObject({ is_error: true, data: { error: 'invalid_arguments' } });
    expect(observations[0].content).toContain('`timeout` (did you mean `timeout_s`? It is in seconds)');
    expect(observations[1].is_error).toBe(false);
    expect(fs.readFileSync(path.join(done.workdir, 'a.txt'), 'utf8')).toBe('one\none\n');
    expect(observations[2].is_error).toBe(true);
    expect(observations[2].content).toContain('`replace_everything`');
    expect(observations[3].content).toContain('did you mean `timeout_s`?');
  });
});

describe('finish beside other calls', () => {
  it('runs the other calls, refuses finish so the model sees their results, then finishes alone', async () => {
    const { observations, done, events } = await run([
      { toolCalls: [{ name: 'finish', arguments: { message: 'too early' } }, { name: 'bash', arguments: { command: 'echo side-effect > out.txt; echo wrote' } }] },
      finish,
    ]);
    expect(done.status).toBe('finished');
    expect(observations.map((event) => `${event.tool_name}:${event.is_error}`)).toEqual(['bash:false', 'finish:true', 'finish:false']);
    expect(observations[1].content).toContain('call `finish` alone');
    const second = harness.llm.requests[1]!.body as any;
    const tools = second.messages.filter((message: any) => message.role === 'tool').map((message: any) => message.content);
    expect(tools.join('\n')).toContain('wrote');
    expect(events.filter((event) => event.kind === 'state_update').at(-1).reason).toContain('finish');
    expect(harness.llm.violations).toEqual([]);
  });
});

describe('finish beside other calls, approved in confirmation mode', () => {
  it('refuses finish at once and asks only for the other calls, which run when approved', async () => {
    harness = await startAgentHarness([{ toolCalls: [{ name: 'finish', arguments: { message: 'early' } }, { name: 'bash', arguments: { command: 'echo approved-ran' } }] }, finish]);
    const id = await harness.createConversation({ confirmation_mode: true, initial_message: 'go' });
    const waiting = await harness.waitForStatus(id, ['waiting_for_confirmation']);
    // finish is refused at once (it would end the run before the model saw bash's result): only bash waits for approval.
    expect(waiting.pending_actions.map((action: any) => action.tool_name)).toEqual(['bash']);
    expect((await harness.post(`/conversations/${id}/approve`)).status).toBe(202);
    await harness.waitForStatus(id, ['waiting_for_confirmation', 'finished', 'error', 'idle']);
    const observations = (await harness.events(id)).filter((event) => event.kind === 'observation');
    expect(observations.map((event) => `${event.tool_name}:${event.is_error}`)).toEqual(['finish:true', 'bash:false']);
    expect(observations[0].data.error).toBe('finish_not_alone');
    expect(observations[1].content).toContain('approved-ran');
    expect(harness.llm.requests).toHaveLength(2);
  });
});

describe('stuck detection', () => {
  it('polling a live command is never a loop', async () => {
    const poll = bash({ command: '', is_input: true, timeout_s: 0.2 });
    const { done, notes } = await run([bash({ command: 'read line; echo slow-done $line', timeout_s: 0.2 }), ...Array.from({ length: 9 }, () => poll), bash({ command: 'go', is_input: true, timeout_s: 5 }), finish]);
    expect(done.status).toBe('finished');
    expect(notes).toEqual([]);
    const observations = (await harness.events(done.id)).filter((event: any) => event.kind === 'observation');
    expect(observations.at(-2).content).toMatch(/slow-done go[\s\S]*\[The command finished with exit code 0 after \d+ s\.\]/);
    expect(observations[1].content).toMatch(/Still running after \d+ s/);
  });

  it('A/B alternation is nudged, and stopped as stuck when it goes on', async () => {
    const a = bash({ command: 'echo a' });
    const b = bash({ command: 'echo b' });
    const { done, notes } = await run([a, b, a, b, a, b, a, b, a, b, a, b, a, b]);
    expect(done.status).toBe('stuck');
    expect(notes).toHaveLength(1);
    expect(notes[0].content).toContain('alternating between the same two calls');
    expect(harness.llm.requests).toHaveLength(12);
  });

  it('the same failing call three times is nudged; a change of approach lets the run go on', async () => {
    const failing = bash({ command: 'ls /no/such/dir-1' });
    const { done, notes } = await run([failing, failing, failing, bash({ command: 'echo different' }), finish]);
    expect(done.status).toBe('finished');
    expect(notes).toHaveLength(1);
    expect(notes[0].content).toContain('failed each time');
    expect((harness.llm.requests[3]!.body as any).messages.at(-1).content).toContain('failed each time');
  });
});

describe('max iterations', () => {
  it('warns at 80 %, asks for a summary without tools on the last step, records it and pauses', async () => {
    const steps = [1, 2, 3, 4].map((n) => bash({ command: `echo step-${n}` }));
    const { done, events, id } = await run([...steps, { text: 'Done: steps 1-4. Left: step 5. Next: run it.' }], { max_iterations_per_run: 5 });
    expect(done.status).toBe('paused');
    const fourth = harness.llm.requests[3]!.body as any;
    expect(fourth.messages.at(-1).content).toContain('You have used 3 of the 5 steps');
    const last = harness.llm.requests[4]!.body as any;
    expect(last.tool_choice).toBe('none');
    expect(last.tools.length).toBeGreaterThan(0);
    expect(last.messages.at(-1).content).toContain('Do not call any tool now');
    expect(events.filter((event) => event.kind === 'message' && event.source === 'agent').at(-1).content).toContain('Left: step 5');
    expect(events.at(-1).reason).toContain('max_iterations_per_run');
    const runs = await harness.get(`/conversations/${id}/runs`);
    expect(runs.body.items[0]).toMatchObject({ outcome: 'max_iterations', iterations: 5 });
    expect(harness.llm.violations).toEqual([]);
  });

  it('tool calls made on the summary step anyway are recorded and answered, never run', async () => {
    const { done, observations } = await run([bash({ command: 'echo one' }), { text: 'summary', toolCalls: [{ name: 'bash', arguments: { command: 'touch should-not-exist' } }] }], { max_iterations_per_run: 2 });
    expect(done.status).toBe('paused');
    expect(observations.at(-1)).toMatchObject({ is_error: true, data: { error: 'budget_spent' } });
    expect(fs.existsSync(path.join(done.workdir, 'should-not-exist'))).toBe(false);
  });
});

describe('bash recovery', () => {
  it('a command ignoring SIGINT is killed by a second C-c and the shell takes commands again', async () => {
    const { done, observations } = await run([
      bash({ command: "bash -c 'trap \"\" INT; echo stubborn; sleep 60'", timeout_s: 1 }),
      bash({ command: 'C-c', is_input: true, timeout_s: 1.5 }),
      bash({ command: 'C-c', is_input: true, timeout_s: 5 }),
      bash({ command: 'echo free-again' }),
      finish,
    ]);
    expect(done.status).toBe('finished');
    expect(observations[1].content).toContain('Send "C-c" again to kill it');
    expect(observations[2].content).toMatch(/killed/);
    expect(observations[3].content).toContain('free-again');
  });
});

describe('where output goes', () => {
  it('a background job logs into .agentd/, and a cut output is kept whole there, with a note saying how to read it', async () => {
    const { done, observations } = await run([bash({ command: 'echo from-job; sleep 30 &' }), bash({ command: 'seq 1 100000' }), finish]);
    expect(done.status).toBe('finished');
    const pid = observations[0].data.pid as number;
    expect(observations[0].content).toContain(path.join(done.workdir, '.agentd', `bg-${pid}.log`));
    const file = observations[1].data.full_output as string;
    expect(path.dirname(file)).toBe(path.join(done.workdir, '.agentd', 'outputs'));
    expect(observations[1].content).toContain(`full output in .agentd/outputs/${path.basename(file)}]`);
    expect(observations[1].content).toContain(`grep -n PATTERN ${file}`);
    expect(fs.readFileSync(file, 'utf8').trim().split('\n')).toHaveLength(100000);
    expect(fs.readFileSync(path.join(done.workdir, '.agentd', '.gitignore'), 'utf8')).toBe('*\n');
  });
});

describe('file_editor: read before edit', () => {
  it('refuses to overwrite an unviewed file, refuses to edit a file changed on disk since it was viewed, and suggests similar names', async () => {
    harness = await startAgentHarness([
      editor({ command: 'create', path: 'notes.txt', file_text: 'replaced\n' }),
      editor({ command: 'view', path: 'notes.txt' }),
      bash({ command: 'echo appended-by-shell >> notes.txt' }),
      editor({ command: 'str_replace', path: 'notes.txt', old_str: 'original', new_str: 'edited' }),
      editor({ command: 'create', path: 'notes.txt', file_text: 'replaced\n' }),
      editor({ command: 'view', path: 'notes.txt' }),
      editor({ command: 'create', path: 'notes.txt', file_text: 'replaced\n' }),
      editor({ command: 'view', path: 'note.txt' }),
      finish,
    ]);
    const workdir = fs.realpathSync(fs.mkdtempSync(path.join(harness.server.dataDir, '..', 'agentd-rbe-')));
    fs.writeFileSync(path.join(workdir, 'notes.txt'), 'original\n');
    const id = await harness.createConversation({ workdir, initial_message: 'go' });
    expect((await harness.waitForStatus(id, ['finished', 'error', 'idle'], 30_000)).status).toBe('finished');
    const observations = (await harness.events(id)).filter((event) => event.kind === 'observation');
    expect(observations[0].is_error).toBe(true);
    expect(observations[0].content).toContain('have not viewed it');
    // Neither an edit nor an overwrite is made on a file someone else wrote since it was viewed.
    for (const refused of [observations[3], observations[4]]) {
      expect(refused.is_error).toBe(true);
      expect(refused.content).toBe('notes.txt has changed on disk since you last viewed or edited it (another command or process wrote it), so it was not changed. View it again, then make the edit on what it holds now.');
    }
    expect(observations[6].is_error).toBe(false);
    expect(observations[6].content).toContain('replacing 2 lines');
    expect(observations[7].content).toContain('Similar names: notes.txt');
    expect(fs.readFileSync(path.join(workdir, 'notes.txt'), 'utf8')).toBe('replaced\n');
  });
});
