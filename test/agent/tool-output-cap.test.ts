/**
 * One place caps every tool's output for the model (the tool executor): a marker with line
 * numbers between the first and last lines, and the full text saved once under
 * .agentd/outputs/. And what the model sent is shown back when its arguments are malformed, and
 * a tool name that differs only in case is taken for the tool.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { FakeTurn } from '../fake-llm/fake-llm-server.js';
import { startAgentHarness, type AgentHarness } from '../support/agent-harness.js';

let harness: AgentHarness;
afterEach(async () => harness?.close());

const call = (name: string, args: Record<string, unknown> | string): FakeTurn => ({ toolCalls: [{ name, arguments: args }] });
const finish: FakeTurn = { toolCalls: [{ name: 'finish', arguments: { message: 'done' } }] };
const formatted = (n: number) => n.toLocaleString('en-US');

async function run(script: FakeTurn[], body: Record<string, unknown> = {}) {
  harness = await startAgentHarness(script);
  const id = await harness.createConversation({ initial_message: 'go', ...body });
  const done = await harness.waitForStatus(id, ['finished', 'idle', 'error', 'stuck', 'paused'], 30_000);
  const events = await harness.events(id);
  return { done, events, observations: events.filter((event) => event.kind === 'observation'), actions: events.filter((event) => event.kind === 'action') };
}

/** The observation split at its one marker: the lines before, the marker, the lines after. */
function splitAtMarker(content: string): { head: string[]; marker: string; tail: string[] } {
  const parts = content.split(/\n(\[(?:lines|characters|cut from) [^\n]*\])\n/);
  expect(parts).toHaveLength(3);
  return { head: parts[0]!.split('\n'), marker: parts[1]!, tail: parts[2]!.split('\n') };
}

/** What the model read for its calls, in the request after them. */
function toolMessages(): string[] {
  return harness.llm.requests.flatMap((request) => (request.body as any).messages.filter((message: any) => message.role === 'tool').map((message: any) => message.content));
}

describe('tool output is capped in one place', () => {
  it('a command printing 20,000 numbered lines: one cut observation with the lines it cut, and one saved file holding the whole output', async () => {
    const { done, observations } = await run([call('bash', { command: "seq -f 'line %g' 1 20000" }), finish]);
    expect(done.status).toBe('finished');
    const whole = Array.from({ length: 20_000 }, (_, i) => `line ${i + 1}\n`).join('');
    const observation = observations[0];
    const { head, marker, tail } = splitAtMarker(observation.content);
    // The kept lines are whole lines, from the start and from the end.
    expect(head).toEqual(Array.from({ length: head.length }, (_, i) => `line ${i + 1}`));
    const outputTail = tail.filter((line) => line.startsWith('line '));
    expect(outputTail.at(-1)).toBe('line 20000');
    const firstKept = 20_000 - outputTail.length + 1;
    expect(outputTail).toEqual(Array.from({ length: outputTail.length }, (_, i) => `line ${firstKept + i}`));
    const file = observation.data.full_output as string;
    expect(marker).toBe(`[lines ${formatted(head.length + 1)}-${formatted(firstKept - 1)} of 20,000 cut; full output in ${path.relative(done.workdir, file)}]`);
    expect(observation.content.length).toBeLessThan(31_000);
    // Saved once, whole, under .agentd/outputs/.
    expect(path.dirname(file)).toBe(path.join(done.workdir, '.agentd', 'outputs'));
    expect(fs.readdirSync(path.join(done.workdir, '.agentd', 'outputs'))).toEqual([path.basename(file)]);
    expect(fs.readFileSync(file, 'utf8')).toBe(whole);
    expect(fs.readdirSync(path.join(done.workdir, '.agentd')).sort()).toEqual(['.gitignore', 'outputs']);
    // The model read the cut observation, and is told how to read the rest.
    expect(toolMessages()[0]).toBe(observation.content);
    expect(observation.content).toContain(`sed -n '${head.length + 1},${head.length + 200}p' ${file}`);
  });

  it('the agent reads the cut lines back from the saved file', async () => {
    const { observations } = await run([
      call('bash', { command: "seq -f 'row %g' 1 20000" }),
      call('bash', { command: "sed -n '10000,10002p' .agentd/outputs/bash-*.txt" }),
      finish,
    ]);
    expect(observations[0].content).not.toContain('row 10000\n');
    expect(observations[1].content).toBe('row 10000\nrow 10001\nrow 10002');
  });

  it('grep is cut by the same code; file_editor view pages itself below the cap', async () => {
    harness = await startAgentHarness([call('grep', { pattern: 'needle' }), call('file_editor', { command: 'view', path: 'big.txt' }), finish]);
    const workdir = fs.realpathSync(fs.mkdtempSync(path.join(harness.server.dataDir, '..', 'agentd-cap-grep-')));
    const long = Array.from({ length: 300 }, (_, i) => `needle ${i + 1} ${'x'.repeat(280)}`).join('\n') + '\n';
    fs.writeFileSync(path.join(workdir, 'big.txt'), long);
    const id = await harness.createConversation({ workdir, initial_message: 'search' });
    expect((await harness.waitForStatus(id, ['finished', 'idle', 'error'], 30_000)).status).toBe('finished');
    const observations = (await harness.events(id)).filter((event) => event.kind === 'observation');
    const grep = observations[0];
    expect(grep.data).toMatchObject({ matches: 100, truncated: true });
    const { head, marker } = splitAtMarker(grep.content);
    const file = grep.data.full_output as string;
    expect(path.basename(file)).toMatch(/^grep-.+\.txt$/);
    const saved = fs.readFileSync(file, 'utf8');
    const savedLines = saved.split('\n');
    expect(savedLines[0]).toBe('Found 100 matching lines in 1 file (newest files first):');
    expect(marker).toMatch(new RegExp(`^\\[lines ${head.length + 1}-\\d+ of ${savedLines.length} cut; full output in \\.agentd/outputs/grep-`));
    expect(head).toEqual(savedLines.slice(0, head.length));
    const view = observations[1];
    expect(view.data.truncated).toBeUndefined();
    expect(view.content.length).toBeLessThan(30_000);
    expect(view.content).toMatch(/Output capped: showed lines 1-\d+ of 300\. Use view_range/);
  });
});

describe('malformed arguments and tool names', () => {
  it('shows the model the arguments it sent when they are not JSON, cut when long', async () => {
    const long = `{"command": "echo ${'z'.repeat(5_000)}`;
    const { observations, actions } = await run([call('bash', '{"command": "echo hi"'), call('bash', long), finish]);
    expect(observations[0]).toMatchObject({ is_error: true, data: { error: 'invalid_arguments' } });
    expect(observations[0].content).toContain('not valid JSON');
    expect(observations[0].content).toContain('You sent:\n{"command": "echo hi"');
    expect(actions[0].arguments).toEqual({});
    expect(observations[1].content).toContain(`You sent:\n{"command": "echo ${'z'.repeat(900)}`);
    expect(observations[1].content).toMatch(/\n\[characters 1,001-4,0\d\d of line 1 \(of 1\) cut: the line is too long to show whole; not shown again\]\n/);
    expect(observations[1].content.length).toBeLessThan(2_500);
    expect(toolMessages()[0]).toBe(observations[0].content);
  });

  it('takes a tool name that differs only in case for the tool, recorded under its own name', async () => {
    const { done, observations, actions } = await run([call('Bash', { command: 'echo case-ok' }), call('FILE_EDITOR', { command: 'create', path: 'a.txt', file_text: 'x\n' }), finish]);
    expect(done.status).toBe('finished');
    expect(actions.map((action) => action.tool_name)).toEqual(['bash', 'file_editor', 'finish']);
    expect(observations.map((observation) => observation.tool_name)).toEqual(['bash', 'file_editor', 'finish']);
    expect(observations[0].content).toBe('case-ok');
    expect(fs.readFileSync(path.join(done.workdir, 'a.txt'), 'utf8')).toBe('x\n');
    const later = harness.llm.requests[1]!.body as any;
    expect(later.messages.find((message: any) => message.role === 'assistant').tool_calls[0].function.name).toBe('bash');
    expect(harness.llm.violations).toEqual([]);
  });

  it('a deny rule on a tool holds against its name in another case', async () => {
    const { observations, events } = await run([call('BASH', { command: 'echo should-not-run > ran.txt' }), finish], { permissions: { default: 'allow', deny: ['bash(echo*)'] } });
    expect(events.filter((event) => event.kind === 'rejection')).toMatchObject([{ tool_name: 'bash', rule: 'deny: bash(echo*)' }]);
    expect(observations.map((observation) => observation.tool_name)).toEqual(['finish']);
  });

  it('a name that matches no tool, in any case, is still refused', async () => {
    const { observations } = await run([call('Bashh', { command: 'echo x' }), finish]);
    expect(observations[0]).toMatchObject({ is_error: true, tool_name: 'Bashh', data: { error: 'unknown_tool' } });
  });
});
